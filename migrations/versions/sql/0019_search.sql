-- Revision 0019: the statements of sql/search.sql that are new or changed since the revision before
-- (its DO blocks around them), written by migrations/sqlfiles.py; frozen: never edit it.

-- pglogic.search(corpus, query): logical semantic search from plain SQL, and
-- pglogic.search_plan(corpus, query), which shows the plan and statement without running it.
--
--   SELECT * FROM pglogic.search('news', '{
--     "tree": {"op": "and", "args": [{"term": "oil prices", "vector": [0.01, ...]},
--                                    {"op": "not", "arg": {"term": "natural gas"}}]},
--     "k": 10}');
--
-- The query: a tree of {"term": TEXT, "vector": [...] | "[...]"} (or just "TEXT"; a term without
-- a vector is looked up in pglogic.term_cache for the corpus's model), {"match": "words"} (a
-- lexical term, searched in the corpus's lexical index), {"op": "and" | "or", "args": [two or
-- more nodes]} and {"op": "not", "arg": NODE}; beside "tree", the options of docs/sql-api.md
-- (its JSON Schema is the reference): operators, truth, k, exact, depth, ef_search,
-- iterative_scan, guide, term_scans, filters, and_text, vectors, lexical, passages,
-- passage_score, not_context, not_mention, mode. A bare tree uses the default options. Bad input
-- is refused with SQLSTATE 22023 and a message naming what was wrong.
--
-- The functions mirror the Python search (pglogic.store.search.search, fuzzy mode):
-- pglogic._plan plans as pglogic.engine.plans does (the filter estimate and the exact plan where
-- it is cheaper, a k-NN scan for a single term, one MATERIALIZED HNSW CTE per distinct positive
-- term plus the scan along the guide vector, pglogic._guide_vector, or the guide's scan alone,
-- or each term's top k; the same depths and hnsw settings; the exact plan again when a filtered,
-- lexical or passage plan returns fewer than k rows) and builds the statement of
-- pglogic.engine.compile.compile_query text for text; pglogic._score_sql writes the fuzzy-logic
-- score (pglogic.engine.operators), pglogic._and_texts each AND's own phrase
-- (pglogic.engine.conjunction), pglogic._not_contexts and pglogic._projected a negated term's
-- vector without its context (pglogic.engine.negation). Over passages (a row in
-- pglogic.passage_layouts) each text's similarity is the best over a document's passages,
-- blended with the document's own vector as "passage_score" says. With the same term and guide
-- vectors it returns the same rows with the same scores as Python (tests/test_sql_functions.py).
--
-- Values are bound as parameters ($1 term vectors, $2 guide vector, $3 depth, $4 gdepth, $5 k,
-- $6 filter parameters, $7 the text search configuration, $8 the lexical terms); identifiers are
-- always quoted (pglogic._qi); operator names are checked against fixed lists before they choose
-- an SQL fragment. Not here: the nsfl and sqo modes, the statement cache and timeouts (set
-- statement_timeout in the transaction). Which revision changed what: migrations/versions/.

-- The vector type must be visible while the functions are created (plpgsql resolves declared
-- types then): append the extension's schema to this transaction's search_path if needed.
DO $do$
DECLARE
    ext_schema name;
BEGIN
    SELECT n.nspname INTO ext_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    IF ext_schema IS NULL THEN
        RAISE EXCEPTION 'pglogic needs the vector extension (pgvector) in this database';
    END IF;
    IF NOT ext_schema = ANY (current_schemas(false)) THEN
        PERFORM set_config(
            'search_path', current_setting('search_path') || ', ' || quote_ident(ext_schema), true
        );
    END IF;
END
$do$;

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

-- Run the vector-using functions with a fixed search_path: pg_catalog and pgvector's schema (and
-- no pg_temp shadowing), whatever the caller's search_path is.
DO $do$
DECLARE
    path text;
BEGIN
    SELECT 'pg_catalog, ' || quote_ident(n.nspname) || ', pg_temp' INTO path
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    EXECUTE format('ALTER FUNCTION pglogic._plan(text, jsonb) SET search_path = %s', path);
    EXECUTE format('ALTER FUNCTION pglogic._guide_vector(jsonb, text[], text[], vector[], text[],'
                   ' text) SET search_path = %s', path);
    EXECUTE format('ALTER FUNCTION pglogic._projected(vector, vector[], double precision) SET '
                   'search_path = %s', path);
    EXECUTE format('ALTER FUNCTION pglogic.search(text, jsonb) SET search_path = %s', path);
    EXECUTE format('ALTER FUNCTION pglogic.search_plan(text, jsonb) SET search_path = %s', path);
    EXECUTE format('ALTER FUNCTION pglogic._vector(jsonb, text) SET search_path = %s', path);
END
$do$;
