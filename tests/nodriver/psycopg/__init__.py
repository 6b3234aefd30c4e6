"""Put first on PYTHONPATH, this hides the installed PostgreSQL driver: a machine without it."""
raise ModuleNotFoundError("No module named 'psycopg'", name="psycopg")
