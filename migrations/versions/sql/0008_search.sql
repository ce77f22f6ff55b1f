-- Revision 0008: the statements of sql/search.sql that are new or changed since the revision before
-- (its DO blocks around them), written by migrations/sqlfiles.py; frozen: never edit it.

-- pglogic.search(corpus, query): logical semantic search from plain SQL (migrations 0002-0007).
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
-- "and=min,or=max,not=complement" or an object {"and": ..., "or": ..., "not": ...}), truth
-- ("clamp" (the default), "affine", "sigmoid:TAU:LAMBDA" or, since migration 0004, "calibrated":
-- the sigmoid stored in pglogic.calibration for the corpus, else for its model), k (10), exact
-- (false), depth and ef_search (null: the defaults of pglogic.engine.plans), iterative_scan
-- (true) and, since migration 0005, guide (true: computed here; false: no guide scan; or the
-- guide vector itself), term_scans (null, true, false) and filters (a list of {"contains":
-- {...}} and {"key": KEY, "op": OP, "value": VALUE}). Since migration 0006 the default operators
-- are "product-max-strong" (NOT (1 - x)^1.25; any NOT may be "complement^G"), and "and_text"
-- (4; 0 to 10) scores each AND's own text (pglogic.engine.conjunction): the phrase of its positive
-- operands, whose vector comes from "vectors" ({"phrase": [...], ...}, written by
-- render.search_json) or pglogic.term_cache.
-- Since migration 0007 a node may be a lexical term {"match": "wheat"} (a word or a phrase, its
-- words in this order: pglogic.query.Match), searched in the corpus's lexical index (the
-- generated tsvector column "tsv", GIN-indexed, in the text search configuration
-- pglogic.lexical_indexes) with phraseto_tsquery; option "lexical" chooses its truth value,
-- "crisp" (the default: 1 when the document's words match, else 0) or "rank" (ts_rank_cd(tsv, q,
-- 32) = r / (r + 1), 0 without a match), used as it is by every operator family (no truth map).
-- Positive lexical terms scan the GIN index for candidates (ranked, depth rows each), negated
-- ones never do; the guide vector and the AND texts are computed from the formula without its
-- lexical terms (pglogic._semantic_part). Option "mode" is "fuzzy" (the only mode here).
-- A bare tree (an object with "op", "term" or "match") is accepted too and uses the default
-- options.
--
-- Since migration 0005 the function plans like the Python search (pglogic.store.search.search,
-- fuzzy mode) and builds the statement of pglogic.engine.compile.compile_query text for text,
-- its placeholders numbered (pglogic._plan): the filter estimate and the exact plan where it is
-- cheaper, the k-NN scan of a single term, one MATERIALIZED HNSW CTE per distinct term of
-- positive polarity plus the scan along the guide vector (pglogic._guide_vector, the ascent of
-- pglogic.engine.guide in double precision), the guide's scan alone (guide_suffices) or each
-- term's top k (union_suffices), the same depths and hnsw settings, and the exact plan again
-- when a filtered plan (or, since 0007, a plan with lexical scans) returns fewer than k rows.
-- With the same term vectors and guide vector (render.search_json passes the one Python
-- computes) it returns the same rows with the same scores. Values are bound as parameters ($1
-- term vectors, $2 guide vector, $3 depth, $4 gdepth, $5 k, $6 filter parameters, $7 the text
-- search configuration, $8 the lexical terms); identifiers are always quoted (pglogic._qi);
-- operator names are checked against fixed lists before they choose an SQL fragment.
-- pglogic.search_plan(corpus, query) shows the plan and statement without running it. Not here: the nsfl and sqo modes,
-- the statement cache and timeouts (set statement_timeout in the transaction).

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

-- public functions --------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pglogic.search(corpus text, query jsonb)
RETURNS TABLE (
    id bigint,
    external_id text,
    title text,
    metadata jsonb,
    score double precision,
    similarities jsonb,
    lexical jsonb
)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    p record;
    s record;
    saved jsonb := '{}';
    citus text;
    -- the statement's rows (its columns, then the similarities and, since migration 0007, the
    -- lexical terms' truth values as JSON objects), best first
    wrap constant text := 'SELECT array_agg(r."id" ORDER BY r.score DESC, r."id"),'
        ' array_agg(r."external_id" ORDER BY r.score DESC, r."id"),'
        ' array_agg(r."title" ORDER BY r.score DESC, r."id"),'
        ' array_agg(r."metadata" ORDER BY r.score DESC, r."id"),'
        ' array_agg(r.score ORDER BY r.score DESC, r."id"),'
        ' array_agg(%s ORDER BY r.score DESC, r."id"),'
        ' array_agg(%s ORDER BY r.score DESC, r."id") FROM (%s) r';
    -- a JSON object of names ($9 or $8) and the statement's columns
    object constant text := '(SELECT jsonb_object_agg(u.name, u.value) FROM unnest(%s::text[],'
        ' ARRAY[%s]::float8[]) AS u(name, value))';
    sims text;
    lex text;
    ids bigint[];
    external_ids text[];
    titles text[];
    metadatas jsonb[];
    scores double precision[];
    similarity jsonb[];
    lexicals jsonb[];
BEGIN
    SELECT * INTO p FROM pglogic._plan(corpus, query);
    sims := coalesce((SELECT format(object, '$9', string_agg(format('r.%s',
                                    pglogic._qi('s' || (n - 1))), ', ' ORDER BY n))
                      FROM generate_series(1, cardinality(p.terms)) AS n
                      HAVING count(*) > 0), '''{}''::jsonb');
    lex := coalesce((SELECT format(object, '$8', string_agg(format('r.%s',
                                   pglogic._qi('l' || (n - 1))), ', ' ORDER BY n))
                     FROM generate_series(1, cardinality(p.lexical)) AS n
                     HAVING count(*) > 0), '''{}''::jsonb');
    -- SET LOCAL for the statement, then back to the caller's values. SET LOCAL statements,
    -- not set_config(): on a Citus coordinator only they reach the workers, once
    -- citus.propagate_set_commands is 'local' (set first here, put back last; its value is
    -- NULL where Citus is not loaded). The names come from pglogic._plan's own list.
    citus := current_setting('citus.propagate_set_commands', true);
    IF citus IS NOT NULL THEN
        SET LOCAL citus.propagate_set_commands = 'local';
    END IF;
    FOR s IN SELECT x.key, x.value FROM jsonb_each_text(p.settings) AS x LOOP
        saved := saved || jsonb_build_object(s.key, current_setting(s.key, true));
        EXECUTE format('SET LOCAL %s = %L', s.key, s.value);
    END LOOP;
    EXECUTE format(wrap, sims, lex, p.statement)
        INTO ids, external_ids, titles, metadatas, scores, similarity, lexicals
        USING p.vectors, p.guide, p.depth, p.gdepth, p.k, p.filter_values, p.text_config,
              p.lexical, p.terms;
    IF p.exact_statement IS NOT NULL AND coalesce(cardinality(ids), 0) < p.k THEN
        -- The filtered index scans found fewer than k rows (a rare filter, a scan that stopped
        -- at hnsw.max_scan_tuples or at ef_search without iterative scans), or the lexical
        -- scans did (few documents match): score every matching row instead, as
        -- pglogic.store.search.search does.
        EXECUTE format(wrap, sims, lex, p.exact_statement)
            INTO ids, external_ids, titles, metadatas, scores, similarity, lexicals
            USING p.vectors, p.guide, p.depth, p.gdepth, p.k, p.filter_values, p.text_config,
                  p.lexical, p.terms;
    END IF;
    FOR s IN SELECT x.key, x.value FROM jsonb_each_text(saved) AS x WHERE x.value IS NOT NULL LOOP
        EXECUTE format('SET LOCAL %s = %L', s.key, s.value);
    END LOOP;
    IF citus IS NOT NULL THEN
        PERFORM set_config('citus.propagate_set_commands', citus, true);
    END IF;
    RETURN QUERY
        SELECT u.id, u.external_id, u.title, u.metadata, u.score, u.similarities, u.lexical
        FROM unnest(ids, external_ids, titles, metadatas, scores, similarity, lexicals)
             WITH ORDINALITY AS u(id, external_id, title, metadata, score, similarities, lexical,
                                  n)
        ORDER BY u.n;
END
$fn$;

COMMENT ON FUNCTION pglogic.search(text, jsonb) IS
    'Logical semantic search: ranked hits of corpus for a query tree, the plans and ranking of '
    'pglogic.store.search.search in Python. Example: SELECT * FROM pglogic.search(''news'', '
    '''{"tree": {"op": "and", "args": [{"term": "oil"}, {"op": "not", "arg": {"term": "gas"}}]},'
    ' "k": 5}'')';

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
    EXECUTE format('ALTER FUNCTION pglogic.search(text, jsonb) SET search_path = %s', path);
    EXECUTE format('ALTER FUNCTION pglogic.search_plan(text, jsonb) SET search_path = %s', path);
END
$do$;
