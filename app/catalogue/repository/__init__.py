"""SQL, one module per table, each function named for what it does. Flush, never commit --
except the single-statement hot paths, which take an asyncpg connection (docs/architecture.md)."""
