"""Put first on PYTHONPATH, this hides the installed psycopg 3 (SQLAlchemy 2.1's postgresql://)."""
raise ModuleNotFoundError("No module named 'psycopg'", name="psycopg")
