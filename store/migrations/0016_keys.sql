-- Keys with names, roles, expiry, revocation and last use: the dialect
-- files (SQLite rebuilds the table to drop a NOT NULL; PostgreSQL alters it).
SELECT 1;
