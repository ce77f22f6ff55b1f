-- pglogic.search(corpus, query): logical semantic search from plain SQL (migration 0002).
--
--   SELECT * FROM pglogic.search('news', '{
--     "tree": {"op": "and", "args": [{"term": "oil prices", "vector": [0.01, ...]},
--                                    {"op": "not", "arg": {"term": "natural gas"}}]},
--     "operators": "itlr", "truth": "clamp", "k": 10}');
--
-- The tree has the nodes {"term": TEXT, "vector": [...] | "[...]"} (or just "TEXT"),
-- {"op": "and" | "or", "args": [two or more nodes]} and {"op": "not", "arg": NODE}. A term without
-- a vector is looked up in pglogic.term_cache for the corpus's model. Options next to "tree":
-- operators (a preset such as "itlr", "godel", a spec "and=min,or=max,not=complement" or an object
-- {"and": ..., "or": ..., "not": ...}), truth ("clamp" | "affine"), k (10), exact (false),
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

CREATE TABLE IF NOT EXISTS pglogic.term_cache (
    model       text NOT NULL,
    term        text NOT NULL CHECK (btrim(term) <> ''),
    embedding   vector NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, term)
);
COMMENT ON TABLE pglogic.term_cache IS
    'Term embeddings by model, so pglogic.search can run terms given without a vector';

-- options -----------------------------------------------------------------------------------

-- A JSON value for an error message, cut to 100 characters.
CREATE OR REPLACE FUNCTION pglogic._show(value jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN length(coalesce(value::text, 'null')) > 100
            THEN left(value::text, 97) || '...' ELSE coalesce(value::text, 'null') END;

CREATE OR REPLACE FUNCTION pglogic._int_option(opts jsonb, name text, dflt integer)
RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    v jsonb := opts -> name;
    n numeric;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN dflt;
    END IF;
    IF jsonb_typeof(v) = 'number' THEN
        n := (v #>> '{}')::numeric;
        IF n = trunc(n) AND abs(n) <= 2147483647 THEN
            RETURN n::integer;
        END IF;
    END IF;
    RAISE EXCEPTION 'Invalid %=%: expected an integer', name, pglogic._show(v)
        USING ERRCODE = '22023';
END
$fn$;

CREATE OR REPLACE FUNCTION pglogic._bool_option(opts jsonb, name text, dflt boolean)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    v jsonb := opts -> name;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN dflt;
    END IF;
    IF jsonb_typeof(v) = 'boolean' THEN
        RETURN (v #>> '{}')::boolean;
    END IF;
    RAISE EXCEPTION 'Invalid %=%: expected true or false', name, pglogic._show(v)
        USING ERRCODE = '22023';
END
$fn$;

CREATE OR REPLACE FUNCTION pglogic._check_operator(kind text, name text, spec text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    valid text[] := CASE kind
        WHEN 'and' THEN ARRAY['product', 'sum', 'min', 'lukasiewicz']
        WHEN 'or' THEN ARRAY['sum', 'max', 'probsum', 'lukasiewicz']
        WHEN 'not' THEN ARRAY['complement', 'reciprocal']
    END;
BEGIN
    IF valid IS NULL THEN
        RAISE EXCEPTION 'Unknown operator kind % in operator family %: expected and, or, not',
            quote_literal(kind), quote_literal(spec) USING ERRCODE = '22023';
    END IF;
    IF name IS NULL OR NOT name = ANY (valid) THEN
        RAISE EXCEPTION 'Unknown % operator % in operator family %: valid % operators are %',
            upper(kind), coalesce(quote_literal(name), 'null'), quote_literal(spec), upper(kind),
            array_to_string(valid, ', ')
            USING ERRCODE = '22023';
    END IF;
    RETURN name;
END
$fn$;

-- Resolve an operator family like pglogic.operators.resolve_family: returns {and, or, not}.
CREATE OR REPLACE FUNCTION pglogic._resolve_operators(spec jsonb)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    usage constant text := 'use a preset (itlr, godel, lukasiewicz, product) or '
        'and=NAME,or=NAME,not=NAME with AND in {product, sum, min, lukasiewicz}, '
        'OR in {sum, max, probsum, lukasiewicz}, NOT in {complement, reciprocal}';
    itlr constant text[] := ARRAY['product', 'sum', 'complement'];
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
        RETURN itlr;
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
        RETURN ARRAY[coalesce(chosen[1], itlr[1]), coalesce(chosen[2], itlr[2]),
                     coalesce(chosen[3], itlr[3])];
    END IF;
    IF jsonb_typeof(spec) <> 'string' THEN
        RAISE EXCEPTION 'Invalid operators=%: %', pglogic._show(spec), usage
            USING ERRCODE = '22023';
    END IF;
    raw := spec #>> '{}';
    txt := lower(regexp_replace(raw, '\s+', '', 'g'));
    IF txt = '' OR txt = 'itlr' THEN
        RETURN itlr;
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
    RETURN ARRAY[coalesce(chosen[1], itlr[1]), coalesce(chosen[2], itlr[2]),
                 coalesce(chosen[3], itlr[3])];
END
$fn$;

CREATE OR REPLACE FUNCTION pglogic._resolve_truth(spec jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    name text;
BEGIN
    IF spec IS NULL OR jsonb_typeof(spec) = 'null' THEN
        RETURN 'clamp';
    END IF;
    IF jsonb_typeof(spec) = 'string' THEN
        name := lower(btrim(spec #>> '{}'));
        IF name = '' THEN
            RETURN 'clamp';
        END IF;
        IF name IN ('clamp', 'affine') THEN
            RETURN name;
        END IF;
    END IF;
    RAISE EXCEPTION 'Unknown truth map %: valid names are clamp, affine',
        CASE WHEN jsonb_typeof(spec) = 'string' THEN quote_literal(spec #>> '{}') ELSE spec::text END
        USING ERRCODE = '22023';
END
$fn$;

-- the tree ----------------------------------------------------------------------------------

-- Validate a tree and collect its distinct terms in order of first appearance (pre-order, like
-- pglogic.query.terms): [{"term": ..., "positive": bool, "vector": json | null}, ...].
CREATE OR REPLACE FUNCTION pglogic._collect_terms(
    node jsonb, positive boolean, acc jsonb, level integer
)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    op text;
    t text;
    vec jsonb;
    entry jsonb;
    child jsonb;
    args jsonb;
    i integer;
BEGIN
    IF level > 100 THEN
        RAISE EXCEPTION 'The query tree is nested more than 100 levels deep'
            USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(node) = 'string' THEN
        node := jsonb_build_object('term', node);
    END IF;
    IF node IS NULL OR jsonb_typeof(node) <> 'object' THEN
        RAISE EXCEPTION 'Invalid query node %: expected {"term": ...} or {"op": ...}',
            pglogic._show(node) USING ERRCODE = '22023';
    END IF;
    IF node ? 'term' THEN
        IF jsonb_typeof(node -> 'term') <> 'string' OR btrim(node ->> 'term') = '' THEN
            RAISE EXCEPTION 'Invalid term %: a term is a non-blank string',
                pglogic._show(node -> 'term')
                USING ERRCODE = '22023';
        END IF;
        t := node ->> 'term';
        vec := coalesce(node -> 'vector', 'null'::jsonb);
        IF jsonb_typeof(vec) NOT IN ('array', 'string', 'null') THEN
            RAISE EXCEPTION 'Invalid vector for term %: expected an array of numbers',
                quote_literal(t) USING ERRCODE = '22023';
        END IF;
        FOR i IN 0 .. jsonb_array_length(acc) - 1 LOOP
            entry := acc -> i;
            IF entry ->> 'term' = t THEN
                IF vec <> 'null' AND entry -> 'vector' <> 'null' AND vec <> entry -> 'vector' THEN
                    RAISE EXCEPTION 'Term % is given two different vectors', quote_literal(t)
                        USING ERRCODE = '22023';
                END IF;
                RETURN jsonb_set(acc, ARRAY[i::text], jsonb_build_object(
                    'term', t,
                    'positive', (entry ->> 'positive')::boolean OR positive,
                    'vector', CASE WHEN entry -> 'vector' = 'null' THEN vec
                                   ELSE entry -> 'vector' END));
            END IF;
        END LOOP;
        RETURN acc || jsonb_build_array(
            jsonb_build_object('term', t, 'positive', positive, 'vector', vec));
    END IF;
    IF jsonb_typeof(node -> 'op') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'Invalid query node %: expected {"term": ...} or {"op": ...}',
            pglogic._show(node) USING ERRCODE = '22023';
    END IF;
    op := lower(node ->> 'op');
    IF op = 'not' THEN
        child := node -> 'arg';
        IF child IS NULL AND jsonb_typeof(node -> 'args') = 'array'
           AND jsonb_array_length(node -> 'args') = 1 THEN
            child := node -> 'args' -> 0;
        END IF;
        IF child IS NULL THEN
            RAISE EXCEPTION 'A "not" node takes one operand in "arg": %', pglogic._show(node)
                USING ERRCODE = '22023';
        END IF;
        RETURN pglogic._collect_terms(child, NOT positive, acc, level + 1);
    ELSIF op IN ('and', 'or') THEN
        args := node -> 'args';
        IF jsonb_typeof(args) IS DISTINCT FROM 'array' OR jsonb_array_length(args) < 2 THEN
            RAISE EXCEPTION 'An "%" node needs two or more operands in "args": %', op,
                pglogic._show(node) USING ERRCODE = '22023';
        END IF;
        FOR i IN 0 .. jsonb_array_length(args) - 1 LOOP
            acc := pglogic._collect_terms(args -> i, positive, acc, level + 1);
        END LOOP;
        RETURN acc;
    END IF;
    RAISE EXCEPTION 'Unknown operator % in query node %: expected "and", "or" or "not"',
        pglogic._show(node -> 'op'), pglogic._show(node) USING ERRCODE = '22023';
END
$fn$;

-- The score expression of a (validated) tree, text for text what pglogic.operators.to_sql
-- renders: the same operations in the same order, so scores are bit for bit the same.
CREATE OR REPLACE FUNCTION pglogic._score_sql(node jsonb, terms text[], ops text[], truth text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    op text;
    x text;
    parts text[] := '{}';
    i integer;
BEGIN
    IF jsonb_typeof(node) = 'string' THEN
        node := jsonb_build_object('term', node);
    END IF;
    IF node ? 'term' THEN
        x := format('%I', 's' || (array_position(terms, node ->> 'term') - 1));
        RETURN CASE truth
            WHEN 'clamp' THEN format('GREATEST(0.0, LEAST(1.0, %s))', x)
            WHEN 'affine' THEN format('((%s + 1.0) / 2.0)', x)
        END;
    END IF;
    op := lower(node ->> 'op');
    IF op = 'not' THEN
        x := pglogic._score_sql(coalesce(node -> 'arg', node -> 'args' -> 0), terms, ops, truth);
        RETURN CASE ops[3]
            WHEN 'complement' THEN format('(1.0 - %s)', x)
            WHEN 'reciprocal' THEN format('(1.0 / GREATEST(%s, 1e-06))', x)
        END;
    END IF;
    FOR i IN 0 .. jsonb_array_length(node -> 'args') - 1 LOOP
        parts := parts || pglogic._score_sql(node -> 'args' -> i, terms, ops, truth);
    END LOOP;
    IF op = 'and' THEN
        RETURN CASE ops[1]
            WHEN 'product' THEN '(' || array_to_string(parts, ' * ') || ')'
            WHEN 'sum' THEN '(' || array_to_string(parts, ' + ') || ')'
            WHEN 'min' THEN 'LEAST(' || array_to_string(parts, ', ') || ')'
            WHEN 'lukasiewicz' THEN format('GREATEST(0.0, ((%s) - %s.0))',
                                           array_to_string(parts, ' + '), cardinality(parts) - 1)
        END;
    END IF;
    RETURN CASE ops[2]
        WHEN 'sum' THEN '(' || array_to_string(parts, ' + ') || ')'
        WHEN 'max' THEN 'GREATEST(' || array_to_string(parts, ', ') || ')'
        WHEN 'probsum' THEN format('(1.0 - (%s))', (SELECT string_agg(format('(1.0 - %s)', p), ' * '
                                                    ORDER BY n) FROM unnest(parts)
                                                    WITH ORDINALITY AS u(p, n)))
        WHEN 'lukasiewicz' THEN 'LEAST(1.0, (' || array_to_string(parts, ' + ') || '))'
    END;
END
$fn$;

-- the plan ----------------------------------------------------------------------------------

-- Everything pglogic.search runs: the statement and its parameters ($1 vectors, $2 depth, $3 k,
-- $4 term texts) and the hnsw settings, built like pglogic.compile.compile_query.
CREATE OR REPLACE FUNCTION pglogic._plan(
    corpus text,
    query jsonb,
    OUT statement text,
    OUT terms text[],
    OUT candidate_terms text[],
    OUT vectors vector[],
    OUT settings jsonb,
    OUT k integer,
    OUT depth integer,
    OUT exact boolean,
    OUT operators text,
    OUT truth text
)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    allowed constant text[] := ARRAY['tree', 'operators', 'truth', 'k', 'exact', 'depth',
                                     'ef_search', 'iterative_scan'];
    c record;
    existing text;
    tree jsonb;
    opts jsonb;
    key text;
    ops text[];
    collected jsonb;
    entry jsonb;
    vec vector;
    ef integer;
    iterative boolean;
    server_iterative boolean;
    tbl text;
    emb text;
    sims text[] := '{}';
    ctes text[] := '{}';
    unions text[] := '{}';
    final text;
    i integer;
    j integer;
BEGIN
    SELECT co.id, co.table_name, e.model, e.dim, e.column_name INTO c
    FROM pglogic.corpora co
    JOIN pglogic.embeddings e ON e.corpus_id = co.id AND e.is_active
    WHERE co.name = corpus;
    IF NOT FOUND THEN
        SELECT string_agg(co.name, ', ' ORDER BY co.name) INTO existing FROM pglogic.corpora co;
        RAISE EXCEPTION 'Unknown corpus %', coalesce(quote_literal(corpus), 'null')
            || coalesce('; existing: ' || existing, '; there are no corpora yet')
            USING ERRCODE = '42704';
    END IF;

    IF query IS NULL OR jsonb_typeof(query) <> 'object' THEN
        RAISE EXCEPTION 'The query must be a JSON object like {"tree": {...}, "k": 10}, not %',
            pglogic._show(query) USING ERRCODE = '22023';
    END IF;
    IF query ? 'tree' THEN
        tree := query -> 'tree';
        opts := query;
        FOR key IN SELECT jsonb_object_keys(query) LOOP
            IF NOT key = ANY (allowed) THEN
                RAISE EXCEPTION 'Unknown option % in the query: valid options are %',
                    quote_literal(key), array_to_string(allowed, ', ') USING ERRCODE = '22023';
            END IF;
        END LOOP;
    ELSIF query ? 'op' OR query ? 'term' THEN
        tree := query;
        opts := '{}';
    ELSE
        RAISE EXCEPTION 'The query has no "tree": give {"tree": {...}, "k": 10, ...} or a bare '
            'tree like {"op": "and", "args": [...]}' USING ERRCODE = '22023';
    END IF;

    k := pglogic._int_option(opts, 'k', 10);
    IF k < 1 THEN
        RAISE EXCEPTION 'Invalid k=%: must be at least 1', k USING ERRCODE = '22023';
    END IF;
    ops := pglogic._resolve_operators(opts -> 'operators');
    operators := format('and=%s,or=%s,not=%s', ops[1], ops[2], ops[3]);
    truth := pglogic._resolve_truth(opts -> 'truth');
    exact := pglogic._bool_option(opts, 'exact', false);
    iterative := pglogic._bool_option(opts, 'iterative_scan', true);
    depth := pglogic._int_option(opts, 'depth', NULL);
    ef := pglogic._int_option(opts, 'ef_search', NULL);

    collected := pglogic._collect_terms(tree, true, '[]', 1);
    terms := ARRAY(SELECT x.e ->> 'term' FROM jsonb_array_elements(collected)
                   WITH ORDINALITY AS x(e, n) ORDER BY x.n);
    candidate_terms := ARRAY(SELECT x.e ->> 'term' FROM jsonb_array_elements(collected)
                             WITH ORDINALITY AS x(e, n)
                             WHERE (x.e ->> 'positive')::boolean ORDER BY x.n);
    settings := '{}';

    IF exact THEN
        candidate_terms := '{}';  -- like the compiler: an exact scan has no candidate CTEs
    ELSE
        IF cardinality(candidate_terms) = 0 THEN
            RAISE EXCEPTION 'The query has no positive term to find candidates with (every term '
                'is negated); set "exact": true to scan every document' USING ERRCODE = '22023';
        END IF;
        IF k > 1000 THEN
            RAISE EXCEPTION 'k=% is above 1000, the most an HNSW scan returns; set "exact": true',
                k USING ERRCODE = '22023';
        END IF;
        -- pglogic.compile.default_depth
        depth := coalesce(depth, GREATEST(k, LEAST(1000, GREATEST(100,
            ceil(10 * k * sqrt(cardinality(candidate_terms)::double precision))::integer))));
        depth := GREATEST(depth, k);
        SELECT coalesce((regexp_match(x.extversion, '^(\d+)\.(\d+)'))::integer[]
                        >= ARRAY[0, 8], false)
        INTO server_iterative FROM pg_extension x WHERE x.extname = 'vector';
        server_iterative := coalesce(server_iterative, false);
        IF depth > 1000 AND NOT (server_iterative AND iterative) THEN
            RAISE EXCEPTION 'depth=% is above 1000 without iterative scans', depth
                USING ERRCODE = '22023';
        END IF;
        ef := coalesce(ef, LEAST(1000, GREATEST(40, depth)));
        IF ef < 1 OR ef > 1000 THEN
            RAISE EXCEPTION 'Invalid ef_search=%: pgvector accepts 1 to 1000', ef
                USING ERRCODE = '22023';
        END IF;
        settings := jsonb_build_object('hnsw.ef_search', ef::text);
        IF server_iterative AND iterative AND depth > ef THEN
            settings := settings || jsonb_build_object('hnsw.iterative_scan', 'relaxed_order');
        END IF;
    END IF;

    vectors := '{}';
    FOR i IN 1 .. cardinality(terms) LOOP
        entry := collected -> (i - 1);
        IF jsonb_typeof(entry -> 'vector') = 'array' THEN
            vec := (entry -> 'vector')::text::vector;
        ELSIF jsonb_typeof(entry -> 'vector') = 'string' THEN
            vec := (entry ->> 'vector')::vector;
        ELSE
            SELECT tc.embedding INTO vec FROM pglogic.term_cache tc
            WHERE tc.model = c.model AND tc.term = terms[i];
            IF NOT FOUND THEN
                RAISE EXCEPTION 'Term % has no vector and is not in pglogic.term_cache for model %',
                    quote_literal(terms[i]), quote_literal(c.model) USING ERRCODE = '22023';
            END IF;
        END IF;
        IF vector_dims(vec) <> c.dim THEN
            RAISE EXCEPTION 'The vector of term % has % dimensions; corpus % needs % (model %)',
                quote_literal(terms[i]), vector_dims(vec), quote_literal(corpus), c.dim,
                quote_literal(c.model) USING ERRCODE = '22023';
        END IF;
        vectors := array_append(vectors, vec);
    END LOOP;

    tbl := format('%I.%I', 'pglogic', c.table_name);
    emb := format('%I.%I', 'd', c.column_name);
    FOR i IN 1 .. cardinality(terms) LOOP
        sims := sims || format('1 - (%s <=> ($1[%s])::vector(%s)) AS %I',
                               emb, i, c.dim, 's' || (i - 1));
    END LOOP;
    final := format(
        'SELECT id, external_id, title, metadata, %s AS score, (SELECT jsonb_object_agg(u.term, '
        'u.sim) FROM unnest($4::text[], ARRAY[%s]) AS u(term, sim)) AS similarities FROM sims'
        || E'\n' || 'ORDER BY score DESC, id LIMIT $3',
        pglogic._score_sql(tree, terms, ops, truth),
        (SELECT string_agg(format('%I', 's' || (n - 1)), ', ' ORDER BY n)
         FROM generate_series(1, cardinality(terms)) AS n));

    IF exact THEN
        statement := format(
            'WITH sims AS (SELECT d.id, d.external_id, d.title, d.metadata, %s FROM %s d '
            'WHERE %s IS NOT NULL AND TRUE)' || E'\n' || '%s',
            array_to_string(sims, ', '), tbl, emb, final);
        RETURN;
    END IF;
    FOR i IN 1 .. cardinality(candidate_terms) LOOP
        j := array_position(terms, candidate_terms[i]);
        ctes := ctes || format(
            '%I AS MATERIALIZED (SELECT d.id FROM %s d WHERE TRUE'
            ' ORDER BY %s <=> ($1[%s])::vector(%s) LIMIT $2)',
            'c' || (j - 1), tbl, emb, j, c.dim);
        unions := unions || format('SELECT id FROM %I', 'c' || (j - 1));
    END LOOP;
    statement := format(
        E'WITH %s,\ncand AS (%s),\nsims AS MATERIALIZED (SELECT d.id, d.external_id, d.title, d.metadata, %s '
        'FROM cand JOIN %s d ON d.id = cand.id)' || E'\n' || '%s',
        array_to_string(ctes, E',\n'), array_to_string(unions, ' UNION '),
        array_to_string(sims, ', '), tbl, final);
END
$fn$;

-- public functions --------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pglogic.search(corpus text, query jsonb)
RETURNS TABLE (
    id bigint,
    external_id text,
    title text,
    metadata jsonb,
    score double precision,
    similarities jsonb
)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    p record;
    s record;
    saved jsonb := '{}';
BEGIN
    SELECT * INTO p FROM pglogic._plan(corpus, query);
    -- SET LOCAL (set_config(..., true)) for the statement, then back to the caller's values:
    -- RETURN QUERY has run the statement to the end when it returns.
    FOR s IN SELECT x.key, x.value FROM jsonb_each_text(p.settings) AS x LOOP
        saved := saved || jsonb_build_object(s.key, current_setting(s.key, true));
        PERFORM set_config(s.key, s.value, true);
    END LOOP;
    RETURN QUERY EXECUTE p.statement USING p.vectors, p.depth, p.k, p.terms;
    FOR s IN SELECT x.key, x.value FROM jsonb_each_text(saved) AS x WHERE x.value IS NOT NULL LOOP
        PERFORM set_config(s.key, s.value, true);
    END LOOP;
END
$fn$;

COMMENT ON FUNCTION pglogic.search(text, jsonb) IS
    'Logical semantic search: ranked hits of corpus for a query tree, like pglogic.search.search in Python. '
    'Example: SELECT * FROM pglogic.search(''news'', ''{"tree": {"op": "and", "args": '
    '[{"term": "oil"}, {"op": "not", "arg": {"term": "gas"}}]}, "k": 5}'')';

CREATE OR REPLACE FUNCTION pglogic.search_plan(corpus text, query jsonb)
RETURNS jsonb
LANGUAGE sql STABLE
RETURN (
    SELECT jsonb_build_object(
        'statement', p.statement,
        'parameters', jsonb_build_array('$1 vector[]: one vector per term',
                                        '$2 integer: depth', '$3 integer: k',
                                        '$4 text[]: the terms'),
        'terms', to_jsonb(p.terms),
        'candidate_terms', to_jsonb(p.candidate_terms),
        'settings', p.settings,
        'k', p.k,
        'depth', p.depth,
        'exact', p.exact,
        'operators', p.operators,
        'truth', p.truth)
    FROM pglogic._plan(corpus, query) AS p
);

COMMENT ON FUNCTION pglogic.search_plan(text, jsonb) IS
    'What pglogic.search(corpus, query) would run: statement, terms, settings. '
    'Example: SELECT pglogic.search_plan(''news'', ''{"op": "or", "args": ["oil", "gas"]}'')';

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
