"""Repository tooling (the demo, the throwaway local Airflow): not shipped in the wheel."""
