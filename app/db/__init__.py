"""Database layer: tables, engine, dialect differences, migrations."""
