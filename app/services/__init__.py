"""Domain decisions. Services take a session and flush; the caller owns the transaction."""
