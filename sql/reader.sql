-- The read-only role pglogic_reader (migrations 0002, 0018; `pglogic db grants` applies it again):
-- search, never write.
--
--   CREATE ROLE app_search LOGIN PASSWORD '...' IN ROLE pglogic_reader;
--
-- Roles belong to the whole cluster, so the role is created only when it does not exist yet
-- (another database of the cluster may have created it). The grants are per database:
-- USAGE on schema pglogic, SELECT on its tables (the version table pglogic_alembic_version among
-- them, so that a reader can check the schema revision), EXECUTE on its functions, and default
-- privileges so that tables (corpora) and functions created later in schema pglogic BY THE ROLE
-- RUNNING THIS are readable too. Corpora created since by another role need
-- GRANT SELECT ON pglogic.corpus_<id> TO pglogic_reader, or `pglogic db grants` again.
-- Without the right to create roles the migration skips all of this with a warning.

DO $do$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pglogic_reader') THEN
        BEGIN
            CREATE ROLE pglogic_reader NOLOGIN;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
                NULL;  -- created concurrently by a migration of another database
            WHEN insufficient_privilege THEN
                RAISE WARNING 'pglogic: cannot create role pglogic_reader (%); '
                    'skipping the read-only grants', SQLERRM;
                RETURN;
        END;
    END IF;
    GRANT USAGE ON SCHEMA pglogic TO pglogic_reader;
    GRANT SELECT ON ALL TABLES IN SCHEMA pglogic TO pglogic_reader;
    GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pglogic TO pglogic_reader;
    ALTER DEFAULT PRIVILEGES IN SCHEMA pglogic GRANT SELECT ON TABLES TO pglogic_reader;
    ALTER DEFAULT PRIVILEGES IN SCHEMA pglogic GRANT EXECUTE ON FUNCTIONS TO pglogic_reader;
END
$do$;
