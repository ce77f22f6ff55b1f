-- Revision 0019: the statements of sql/search.sql that are new or changed since the revision before, written
-- by migrations/sqlfiles.py; frozen: never edit it. It runs between the file's DO blocks (applied).

-- A vector given in JSON (an array of numbers, or pgvector's text in a string) as a vector; since
-- migration 0017 what pgvector cannot read is an invalid value (22023) that names what it was for,
-- not a raw cast error that echoes the whole input. The dimension is checked by the caller.
CREATE OR REPLACE FUNCTION pglogic._vector(v jsonb, what text)
RETURNS vector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    r vector;
BEGIN
    IF jsonb_typeof(v) = 'array' THEN
        IF EXISTS (SELECT FROM jsonb_array_elements(v) AS x(e) WHERE jsonb_typeof(e) <> 'number')
        THEN
            RAISE EXCEPTION 'Invalid vector for %: expected an array of numbers, got %', what,
                pglogic._show(v) USING ERRCODE = '22023';
        END IF;
        r := v::text::vector;
    ELSE
        r := (v #>> '{}')::vector;
    END IF;
    -- as pglogic.store.ingest.vector_problem: a zero vector's cosine similarity is NaN
    IF vector_norm(r) = 0 THEN
        RAISE EXCEPTION 'Invalid vector for %: it is a zero vector (no direction: its cosine '
            'similarity is undefined)', what USING ERRCODE = '22023';
    END IF;
    RETURN r;
EXCEPTION
    WHEN data_exception OR program_limit_exceeded THEN
        IF SQLSTATE = '22023' THEN
            RAISE;
        END IF;
        RAISE EXCEPTION 'Invalid vector for %: %, got %', what,
            CASE SQLSTATE WHEN '22003' THEN 'a number is out of range'
                          WHEN '54000' THEN 'more than 16,000 dimensions'
                          ELSE regexp_replace(SQLERRM, ':.*$', '') END,
            pglogic._show(v) USING ERRCODE = '22023';
END
$fn$;
