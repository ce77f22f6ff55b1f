-- Revision 0003: the statements of sql/search.sql that are new or changed since the revision before
-- (its DO blocks around them), written by migrations/sqlfiles.py; frozen: never edit it.

-- pglogic.search(corpus, query): logical semantic search from plain SQL (migrations 0002, 0003).
--
--   SELECT * FROM pglogic.search('news', '{
--     "tree": {"op": "and", "args": [{"term": "oil prices", "vector": [0.01, ...]},
--                                    {"op": "not", "arg": {"term": "natural gas"}}]},
--     "operators": "product-max", "truth": "clamp", "k": 10}');
--
-- The tree has the nodes {"term": TEXT, "vector": [...] | "[...]"} (or just "TEXT"),
-- {"op": "and" | "or", "args": [two or more nodes]} and {"op": "not", "arg": NODE}. A term without
-- a vector is looked up in pglogic.term_cache for the corpus's model. Options next to "tree":
-- operators (a preset such as "product-max" (the default since migration 0003), "itlr", a spec
-- "and=min,or=max,not=complement" or an object {"and": ..., "or": ..., "not": ...}), truth ("clamp" | "affine"), k (10), exact (false),
-- depth and ef_search (null: the defaults of pglogic.compile.default_depth), iterative_scan (true).
-- A bare tree (an object with "op" or "term") is accepted too and uses the default options.
--
-- The statement is built exactly like the Python compiler (pglogic/compile.py) builds it: one
-- MATERIALIZED HNSW CTE per distinct term of positive polarity, their union, the exact similarity
-- of every term on every candidate, the fuzzy score, ORDER BY score DESC, id LIMIT k; so it ranks
-- exactly as the Python path does. Term texts and vectors are bound as parameters ($1 vectors,
-- $2 depth, $3 k, $4 term texts); identifiers are quoted with format('%I'); operator names are
-- checked against fixed lists before they choose an SQL fragment. pglogic.search_plan(corpus,
-- query) shows the statement without running it.

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

-- Resolve an operator family like pglogic.operators.resolve_family: returns {and, or, not}.
-- Since migration 0003 the default (and the fill-in for partial specs) is product-max.
CREATE OR REPLACE FUNCTION pglogic._resolve_operators(spec jsonb)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    usage constant text := 'use a preset (product-max, itlr, godel, lukasiewicz, product) or '
        'and=NAME,or=NAME,not=NAME with AND in {product, sum, min, lukasiewicz}, '
        'OR in {sum, max, probsum, lukasiewicz}, NOT in {complement, reciprocal}';
    dflt constant text[] := ARRAY['product', 'max', 'complement'];
    kinds constant text[] := ARRAY['and', 'or', 'not'];
    chosen text[] := ARRAY[NULL, NULL, NULL]::text[];
    raw text;
    txt text;
    m text[];
    parts text[];
    part text;
    kind text;
    val jsonb;
    pos integer;
BEGIN
    IF spec IS NULL OR jsonb_typeof(spec) = 'null' THEN
        RETURN dflt;
    END IF;
    IF jsonb_typeof(spec) = 'object' THEN
        FOR kind, val IN SELECT e.key, e.value FROM jsonb_each(spec) AS e LOOP
            pos := array_position(kinds, lower(kind));
            IF pos IS NULL THEN
                PERFORM pglogic._check_operator(kind, NULL, spec::text);
            END IF;
            IF jsonb_typeof(val) <> 'string' THEN
                PERFORM pglogic._check_operator(lower(kind), val::text, spec::text);
            END IF;
            chosen[pos] := pglogic._check_operator(
                lower(kind), lower(btrim(val #>> '{}')), spec::text
            );
        END LOOP;
        RETURN ARRAY[coalesce(chosen[1], dflt[1]), coalesce(chosen[2], dflt[2]),
                     coalesce(chosen[3], dflt[3])];
    END IF;
    IF jsonb_typeof(spec) <> 'string' THEN
        RAISE EXCEPTION 'Invalid operators=%: %', pglogic._show(spec), usage
            USING ERRCODE = '22023';
    END IF;
    raw := spec #>> '{}';
    txt := lower(regexp_replace(raw, '\s+', '', 'g'));
    IF txt = '' OR txt = 'product-max' THEN
        RETURN dflt;
    ELSIF txt = 'itlr' THEN
        RETURN ARRAY['product', 'sum', 'complement'];
    ELSIF txt = 'godel' THEN
        RETURN ARRAY['min', 'max', 'complement'];
    ELSIF txt = 'lukasiewicz' THEN
        RETURN ARRAY['lukasiewicz', 'lukasiewicz', 'complement'];
    ELSIF txt = 'product' THEN
        RETURN ARRAY['product', 'probsum', 'complement'];
    END IF;
    m := coalesce(regexp_match(txt, '^itlr\[([^\]]*)\]$'), regexp_match(txt, '^itlr:(.*)$'));
    IF m IS NOT NULL THEN
        parts := regexp_split_to_array(m[1], '[,/]');
        IF cardinality(parts) <> 3 THEN
            RAISE EXCEPTION 'Expected three operators (AND, OR, NOT) in operator family %, got %',
                quote_literal(raw), cardinality(parts) USING ERRCODE = '22023';
        END IF;
        RETURN ARRAY[pglogic._check_operator('and', parts[1], raw),
                     pglogic._check_operator('or', parts[2], raw),
                     pglogic._check_operator('not', parts[3], raw)];
    END IF;
    IF position('=' IN txt) = 0 THEN
        RAISE EXCEPTION 'Unknown operator family %: %', quote_literal(raw), usage
            USING ERRCODE = '22023';
    END IF;
    FOREACH part IN ARRAY string_to_array(txt, ',') LOOP
        IF position('=' IN part) = 0 THEN
            RAISE EXCEPTION 'Expected KIND=NAME, got % in operator family %',
                quote_literal(part), quote_literal(raw) USING ERRCODE = '22023';
        END IF;
        kind := split_part(part, '=', 1);
        pos := array_position(kinds, kind);
        IF pos IS NULL THEN
            PERFORM pglogic._check_operator(kind, NULL, raw);
        END IF;
        IF chosen[pos] IS NOT NULL THEN
            RAISE EXCEPTION 'Operator kind % given twice in operator family %',
                quote_literal(kind), quote_literal(raw) USING ERRCODE = '22023';
        END IF;
        chosen[pos] := pglogic._check_operator(kind, substr(part, length(kind) + 2), raw);
    END LOOP;
    RETURN ARRAY[coalesce(chosen[1], dflt[1]), coalesce(chosen[2], dflt[2]),
                 coalesce(chosen[3], dflt[3])];
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
    EXECUTE format('ALTER FUNCTION pglogic.search(text, jsonb) SET search_path = %s', path);
    EXECUTE format('ALTER FUNCTION pglogic.search_plan(text, jsonb) SET search_path = %s', path);
END
$do$;
