"""Operations: readiness checks, gauge sampling and retention sweepers (no HTTP here)."""
