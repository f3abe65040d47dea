"""`async with` for the client's objects that hold connections (the client, stream sessions,
event streams): leaving the block calls their `aclose()`."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncClosing:
    """Base of an object with `aclose()`; `async with obj:` closes it at the block's end."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
