-- Columns of one table or view ($1 = schema, $2 = name) in declared order, for the
-- Dagster UI's column schema (dagster/column_schema).
SELECT column_name, data_type, is_nullable = 'YES' AS nullable
FROM information_schema.columns
WHERE table_schema = ? AND table_name = ?
ORDER BY ordinal_position
