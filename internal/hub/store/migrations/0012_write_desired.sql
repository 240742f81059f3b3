-- SQLite needs nothing here: its desired-state write runs in the Hub's
-- process (desired.go). The PostgreSQL migration of the same number adds
-- a function that runs that write in the database in one round trip.
SELECT 1;
