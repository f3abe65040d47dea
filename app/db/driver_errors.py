"""Driver errors as the DBAPI classes SQLAlchemy raises, for the fast path (app/db/direct.py),
which runs statements on the driver connection itself."""

from __future__ import annotations

from typing import Any

import asyncpg

# asyncpg's public exception classes and the PEP 249 class (an attribute of the dialect's
# DBAPI module, `dialect.loaded_dbapi`) each stands for: the classes SQLAlchemy's own asyncpg
# adapter raises, so callers classify a fast-path error exactly as a Core one (the most
# specific class of the error's MRO wins).
_ASYNCPG_CLASSES = {
    asyncpg.exceptions.IntegrityConstraintViolationError: "IntegrityError",
    asyncpg.exceptions.PostgresError: "Error",
    asyncpg.exceptions.SyntaxOrAccessError: "ProgrammingError",
    asyncpg.exceptions.InterfaceError: "InterfaceError",
    asyncpg.exceptions.InvalidCachedStatementError: "InvalidCachedStatementError",
    asyncpg.exceptions.InternalServerError: "InternalServerError",
    asyncpg.exceptions.RestrictViolationError: "RestrictViolationError",
    asyncpg.exceptions.NotNullViolationError: "NotNullViolationError",
    asyncpg.exceptions.ForeignKeyViolationError: "ForeignKeyViolationError",
    asyncpg.exceptions.UniqueViolationError: "UniqueViolationError",
    asyncpg.exceptions.CheckViolationError: "CheckViolationError",
    asyncpg.exceptions.ExclusionViolationError: "ExclusionViolationError",
    asyncpg.exceptions.InternalClientError: "InternalClientError",
}


def translate(dialect: Any, error: Exception) -> Exception:
    """A driver error as the dialect's DBAPI class. sqlite3's errors are the DBAPI's own;
    asyncpg's map by class (the SQLSTATE rides along as `sqlstate` / `pgcode`)."""
    dbapi = dialect.loaded_dbapi
    if isinstance(error, dbapi.Error) or dialect.name != "postgresql":
        return error
    for cls in type(error).__mro__:
        name = _ASYNCPG_CLASSES.get(cls)
        if name is not None:
            translated: Exception = getattr(dbapi, name, dbapi.Error)(
                error.args[0] if error.args else str(error), error
            )
            return translated
    return error
