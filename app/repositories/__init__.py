"""SQL, one module per table, each function named for what it does. They flush, never commit."""
