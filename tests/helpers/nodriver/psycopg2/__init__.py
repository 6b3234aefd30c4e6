"""Put first on PYTHONPATH, this hides the installed psycopg2 (SQLAlchemy < 2.1's postgresql://)."""
raise ModuleNotFoundError("No module named 'psycopg2'", name="psycopg2")
