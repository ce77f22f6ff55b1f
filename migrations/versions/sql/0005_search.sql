-- Revision 0005: the statements of sql/search.sql that are new or changed since the revision before, written
-- by migrations/sqlfiles.py; frozen: never edit it. It runs between the file's DO blocks (applied).

-- pglogic.search(corpus, query): logical semantic search from plain SQL (migrations 0002-0005).
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
-- {...}} and {"key": KEY, "op": OP, "value": VALUE}).
-- A bare tree (an object with "op" or "term") is accepted too and uses the default options.
--
-- Since migration 0005 the function plans like the Python search (pglogic.store.search.search,
-- fuzzy mode) and builds the statement of pglogic.engine.compile.compile_query text for text,
-- its placeholders numbered (pglogic._plan): the filter estimate and the exact plan where it is
-- cheaper, the k-NN scan of a single term, one MATERIALIZED HNSW CTE per distinct term of
-- positive polarity plus the scan along the guide vector (pglogic._guide_vector, the ascent of
-- pglogic.engine.guide in double precision), the guide's scan alone (guide_suffices) or each
-- term's top k (union_suffices), the same depths and hnsw settings, and the exact plan again
-- when a filtered plan returns fewer than k rows. With the same term vectors and guide vector
-- (render.search_json passes the one Python computes) it returns the same rows with the same
-- scores. Values are bound as parameters ($1 term vectors, $2 guide vector, $3 depth, $4 gdepth,
-- $5 k, $6 filter parameters); identifiers are always quoted (pglogic._qi); operator names are
-- checked against fixed lists before they choose an SQL fragment. pglogic.search_plan(corpus,
-- query) shows the plan and statement without running it. Not here: the nsfl and sqo modes,
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
        x := pglogic._qi('s' || (array_position(terms, node ->> 'term') - 1));
        IF truth LIKE 'sigmoid:%' THEN  -- pglogic.operators.sigmoid_truth, EXP_CAP = 700
            RETURN format('(1.0 / (1.0 + exp(LEAST(700.0, GREATEST(-700.0, ((%s - %s) * %s))))))',
                          split_part(truth, ':', 2), x, split_part(truth, ':', 3));
        END IF;
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

-- identifiers and filters --------------------------------------------------------------------

-- An identifier as psycopg's sql.Identifier writes it: always double-quoted, quotes doubled.
CREATE OR REPLACE FUNCTION pglogic._qi(name text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN '"' || replace(name, '"', '""') || '"';

-- A JSON number as Python's json.loads reads it, written back by json.dumps: an integer when
-- its text has no fraction or exponent, else a float (pglogic._float_text: Python's repr).
CREATE OR REPLACE FUNCTION pglogic._json_number_text(value jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE WHEN value::text ~ '[.eE]' THEN pglogic._float_text((value #>> '{}')::double precision)
            ELSE value::text END;

-- The metadata filters of the query's "filters" (a JSON array) as one SQL condition on column
-- col, text for text what pglogic.engine.filters.filters_sql writes, with the placeholders of
-- its parameters numbered: the i-th parameter, in the order filters_sql makes them, is
-- $<slot>[i] (a text[] of their values, which pglogic.search binds). Each filter is
-- {"contains": {...}} (the metadata contains this object) or {"key": KEY, "op": OP, "value":
-- JSON} with OP one of =, !=, <, <=, >, >=, with the semantics of pglogic.engine.filters.
CREATE OR REPLACE FUNCTION pglogic._filters_sql(
    filters jsonb, col text, slot integer, OUT condition text, OUT params text[]
)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    usage constant text := '{"contains": {...}} or {"key": KEY, "op": OP, "value": VALUE} with OP'
        || ' one of =, !=, <, <=, >, >=';
    -- pglogic.engine.filters.NUMERIC_TEXT: a JSON string that holds a number
    numeric_text constant text := '^\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*$';
    f jsonb;
    key text;
    op text;
    val jsonb;
    forms jsonb[];
    form jsonb;
    alts text[];
    expr text;
    parts text[] := '{}';
    k text;
    v text;
    shown text;
BEGIN
    params := '{}';
    IF filters IS NULL OR jsonb_typeof(filters) = 'null' THEN
        condition := 'TRUE';
        RETURN;
    END IF;
    IF jsonb_typeof(filters) <> 'array' THEN
        RAISE EXCEPTION 'Invalid filters=%: expected a list of filters, each %',
            pglogic._show(filters), usage USING ERRCODE = '22023';
    END IF;
    FOR f IN SELECT e FROM jsonb_array_elements(filters) WITH ORDINALITY AS x(e, n) ORDER BY n LOOP
        IF jsonb_typeof(f) = 'object' AND f ? 'contains'
           AND (SELECT count(*) FROM jsonb_object_keys(f)) = 1 THEN
            IF jsonb_typeof(f -> 'contains') <> 'object' THEN
                RAISE EXCEPTION 'Invalid filter %: "contains" takes a JSON object',
                    pglogic._show(f) USING ERRCODE = '22023';
            END IF;
            params := params || (f -> 'contains')::text;
            parts := parts || format('%s @> $%s[%s]::jsonb', col, slot, cardinality(params));
            CONTINUE;
        END IF;
        IF jsonb_typeof(f) IS DISTINCT FROM 'object' OR NOT f ?& ARRAY['key', 'op', 'value']
           OR (SELECT count(*) FROM jsonb_object_keys(f)) <> 3 THEN
            RAISE EXCEPTION 'Invalid filter %: expected %', pglogic._show(f), usage
                USING ERRCODE = '22023';
        END IF;
        IF jsonb_typeof(f -> 'key') <> 'string' THEN
            RAISE EXCEPTION 'Invalid filter %: the key is a string', pglogic._show(f)
                USING ERRCODE = '22023';
        END IF;
        IF jsonb_typeof(f -> 'op') <> 'string' THEN
            RAISE EXCEPTION 'Invalid filter %: expected %', pglogic._show(f), usage
                USING ERRCODE = '22023';
        END IF;
        key := f ->> 'key';
        op := f ->> 'op';
        val := f -> 'value';
        IF NOT op = ANY (ARRAY['=', '!=', '<', '<=', '>', '>=']) THEN
            RAISE EXCEPTION 'Invalid filter operator %', quote_literal(op) USING ERRCODE = '22023';
        END IF;
        IF op IN ('=', '!=') THEN
            -- containment (GIN-indexable): the value, an array holding it, a number as text
            forms := ARRAY[jsonb_build_object(key, val)];
            IF jsonb_typeof(val) IN ('string', 'number') THEN
                forms := forms || jsonb_build_object(key, jsonb_build_array(val));
                IF jsonb_typeof(val) = 'number' THEN
                    forms := forms || jsonb_build_object(key, pglogic._json_number_text(val));
                END IF;
            END IF;
            alts := '{}';
            FOREACH form IN ARRAY forms LOOP
                params := params || form::text;
                alts := alts || format('%s @> $%s[%s]::jsonb', col, slot, cardinality(params));
            END LOOP;
            expr := '(' || array_to_string(alts, ' OR ') || ')';
            -- (a NULL metadata holds no key: it passes !=)
            parts := parts || CASE WHEN op = '!=' THEN format('NOT coalesce(%s, false)', expr)
                                   ELSE expr END;
            CONTINUE;
        END IF;
        IF jsonb_typeof(val) = 'number' THEN
            params := params || key;
            k := format('$%s[%s]', slot, cardinality(params));
            -- the number as Python binds it: an int exactly, a float through float8
            params := params || CASE WHEN val::text ~ '[.eE]'
                                     THEN (val #>> '{}')::double precision::numeric::text
                                     ELSE val::text END;
            v := format('$%s[%s]', slot, cardinality(params));
            parts := parts || format(
                'CASE jsonb_typeof(%1$s -> %2$s) WHEN ''number'' THEN (%1$s -> %2$s)::numeric'
                ' WHEN ''string'' THEN CASE WHEN (%1$s ->> %2$s) ~ %3$s'
                ' THEN (%1$s ->> %2$s)::numeric END END %4$s %5$s::numeric',
                col, k, ' ' || quote_literal(numeric_text), op, v);
        ELSIF jsonb_typeof(val) = 'string' THEN
            params := params || key;
            k := format('$%s[%s]', slot, cardinality(params));
            params := params || (val #>> '{}');
            v := format('$%s[%s]', slot, cardinality(params));
            parts := parts || format(
                '(jsonb_typeof(%1$s -> %2$s) = ''string'' AND (%1$s ->> %2$s) %3$s %4$s::text)',
                col, k, op, v);
        ELSE
            shown := CASE WHEN val IS NULL THEN 'null' ELSE val::text END;
            RAISE EXCEPTION 'Invalid filter %: only numbers and strings can be compared with %; '
                'use %=% for equality', key || op || shown, op, key, shown
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    condition := CASE WHEN cardinality(parts) = 0 THEN 'TRUE'
                      ELSE array_to_string(parts, ' AND ') END;
END
$fn$;

-- the plans: pglogic.engine.plans --------------------------------------------------------------

-- pglogic.engine.plans.default_depth: per-term candidate depth from k and the number of terms.
CREATE OR REPLACE FUNCTION pglogic._default_depth(k bigint, n_terms integer)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN GREATEST(k, LEAST(1000, GREATEST(100, ceil(10 * k::double precision
                                                  * sqrt(n_terms::double precision))))::bigint);

-- pglogic.engine.plans.guide_depth: the guide's scan, the terms' depth and at least a 4-term query's.
CREATE OR REPLACE FUNCTION pglogic._guide_depth(k bigint, depth bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN GREATEST(depth, pglogic._default_depth(k, 4));

-- pglogic.engine.plans.guide_only_depth: the guide's scan when it is the only one (twice
-- guide_depth), thinned under a filter that keeps the fraction selectivity of the rows.
CREATE OR REPLACE FUNCTION pglogic._guide_only_depth(k bigint, selectivity double precision)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    unfiltered bigint := LEAST(1000, 2 * pglogic._guide_depth(k, pglogic._default_depth(k, 1)));
    wider bigint;
    thinned bigint;
BEGIN
    IF selectivity IS NULL OR NOT (selectivity > 0 AND selectivity < 1) THEN
        RETURN unfiltered;
    END IF;
    wider := ceil(k / selectivity)::bigint;
    thinned := ceil(selectivity * LEAST(1000, 2 * pglogic._guide_depth(
        wider, pglogic._default_depth(wider, 1))))::bigint;
    RETURN GREATEST(pglogic._default_depth(k, 1), LEAST(unfiltered, thinned));
END
$fn$;

-- pglogic.engine.plans.guide_suffices, its walk: (holds a root-positive term, has a disjunction
-- of two such operands).
CREATE OR REPLACE FUNCTION pglogic._guide_walk(
    node jsonb, positive boolean, OUT holds boolean, OUT disjunctive boolean
)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    op text;
    child record;
    n_holding integer := 0;
BEGIN
    IF jsonb_typeof(node) = 'string' OR node ? 'term' THEN
        holds := positive;
        disjunctive := false;
        RETURN;
    END IF;
    op := lower(node ->> 'op');
    IF op = 'not' THEN
        SELECT * INTO holds, disjunctive
        FROM pglogic._guide_walk(coalesce(node -> 'arg', node -> 'args' -> 0), NOT positive);
        RETURN;
    END IF;
    disjunctive := false;
    FOR child IN SELECT w.* FROM jsonb_array_elements(node -> 'args') AS a(e),
                 LATERAL pglogic._guide_walk(a.e, positive) AS w LOOP
        n_holding := n_holding + child.holds::integer;
        disjunctive := disjunctive OR child.disjunctive;
    END LOOP;
    holds := n_holding > 0;
    -- OR, or AND under a NOT
    disjunctive := disjunctive OR ((op = 'or') = positive AND n_holding >= 2);
END
$fn$;

-- pglogic.engine.plans.guide_suffices: whether the guide's scan alone finds the formula's best
-- documents (no positive OR of two operands that each hold a positive term).
CREATE OR REPLACE FUNCTION pglogic._guide_suffices(tree jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN NOT (SELECT w.disjunctive FROM pglogic._guide_walk(tree, true) AS w);

-- Whether a node is a term or an OR of such disjunctions.
CREATE OR REPLACE FUNCTION pglogic._disjunction(node jsonb)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
BEGIN
    IF jsonb_typeof(node) = 'string' OR node ? 'term' THEN
        RETURN true;
    END IF;
    IF lower(node ->> 'op') <> 'or' THEN
        RETURN false;
    END IF;
    RETURN (SELECT bool_and(pglogic._disjunction(a.e))
            FROM jsonb_array_elements(node -> 'args') AS a(e));
END
$fn$;

-- pglogic.engine.plans.union_suffices: whether each term's own top k hold the formula's top k (a
-- disjunction of positive terms when OR is max).
CREATE OR REPLACE FUNCTION pglogic._union_suffices(tree jsonb, or_operator text)
RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN or_operator = 'max' AND coalesce(lower(tree ->> 'op') = 'or', false)
       AND pglogic._disjunction(tree);

-- pglogic.engine.plans.EXACT_SWITCH and prefer_exact: whether scoring every row that passes a
-- filter beats the filtered HNSW scans of plan 'terms', 'guide' or 'union'.
CREATE OR REPLACE FUNCTION pglogic._prefer_exact(
    matching_rows double precision, k bigint, candidate_terms integer, plan text,
    selectivity double precision
)
RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE plan
    WHEN 'guide' THEN matching_rows <= 17 * pglogic._guide_only_depth(k, selectivity)
    WHEN 'union' THEN matching_rows <= 17 * candidate_terms
        * GREATEST(k::double precision, pglogic._default_depth(k, 1) * selectivity)
    ELSE matching_rows <= 17 * candidate_terms * pglogic._default_depth(k, candidate_terms)
END;

-- the guide vector: pglogic.engine.guide ------------------------------------------------------

-- The dot product of two arrays of double precision.
CREATE OR REPLACE FUNCTION pglogic._dot(a double precision[], b double precision[])
RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (SELECT sum(x * y) FROM unnest(a, b) AS u(x, y));

-- G a for the n x n matrix G stored row after row and a of length n.
CREATE OR REPLACE FUNCTION pglogic._gram_times(g double precision[], a double precision[])
RETURNS double precision[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN ARRAY(SELECT sum(m * a[(o - 1) % cardinality(a) + 1])
             FROM unnest(g) WITH ORDINALITY AS u(m, o)
             GROUP BY (o - 1) / cardinality(a) ORDER BY (o - 1) / cardinality(a));

-- The guide vector of pglogic.engine.guide.guide_vector (pglogic.engine.sqo.optimise with the
-- settings GUIDE), in double precision: Riemannian gradient ascent of log F on the unit sphere
-- from the normalised mean of the positive terms' unit vectors (no jitter), learning rate 0.2,
-- at most 100 steps, stopping after 5 steps without an improvement of 1e-4; dF/ds by central
-- differences (h = 1e-4), every step evaluating the score SQL of pglogic._score_sql once over
-- the 2n+1 similarity rows. Returns the best point seen, as a vector (float4).
-- The start, every gradient (a combination of the term vectors) and so every point lie in the
-- span of the n unit term vectors u_i: the ascent runs on the coefficients a of x = sum a_i u_i,
-- with the Gram matrix G (u_i . u_j) for the similarities (G a) and the norms (a.G.a), and
-- only the result is expanded to the corpus's dimension. Same steps as NumPy's; the rounding
-- differs in the last bits (bench: cosine to NumPy's guide 1 - 1e-8 or closer, in float4).
CREATE OR REPLACE FUNCTION pglogic._guide_vector(
    tree jsonb, terms text[], positive text[], vectors vector[], ops text[], truth text
)
RETURNS vector
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    h constant double precision := 1e-4;
    lr constant double precision := 0.2;
    max_steps constant integer := 100;
    patience constant integer := 5;
    tol constant double precision := 1e-4;
    n constant integer := cardinality(terms);
    dim constant integer := vector_dims(vectors[1]);
    mat double precision[] := '{}';  -- the unit term vectors, row after row (n * dim)
    gram double precision[];  -- u_i . u_j at (i - 1) * n + j
    a double precision[];  -- the point x = sum a_i u_i
    best_a double precision[];
    r double precision[];  -- the Riemannian gradient's coefficients
    dfds double precision[];
    sims double precision[];
    f double precision[];
    best_f double precision;
    g_x double precision;
    nrm double precision;
    row_ double precision[];
    stale integer := 0;
    pos integer[];
    evaluate text;
    i integer;
    j integer;
BEGIN
    FOR i IN 1 .. n LOOP
        row_ := vectors[i]::real[]::double precision[];
        nrm := GREATEST(sqrt((SELECT sum(v * v) FROM unnest(row_) AS u(v))), 1e-12);
        mat := mat || ARRAY(SELECT v / nrm FROM unnest(row_) WITH ORDINALITY AS u(v, o)
                            ORDER BY o);
    END LOOP;
    gram := ARRAY(SELECT sum(p.v * q.v)
                  FROM unnest(mat) WITH ORDINALITY AS p(v, o)
                  JOIN unnest(mat) WITH ORDINALITY AS q(v, o) ON (p.o - 1) % dim = (q.o - 1) % dim
                  GROUP BY (p.o - 1) / dim, (q.o - 1) / dim
                  ORDER BY (p.o - 1) / dim, (q.o - 1) / dim);
    pos := ARRAY(SELECT array_position(terms, t) FROM unnest(positive) AS p(t));
    IF cardinality(pos) = 0 THEN
        pos := ARRAY(SELECT generate_series(1, n));
    END IF;
    -- the start: the mean of the positive terms' unit vectors, normalised
    a := array_fill(0::double precision, ARRAY[n]);
    FOREACH i IN ARRAY pos LOOP
        a[i] := 1.0 / cardinality(pos);
    END LOOP;
    sims := pglogic._gram_times(gram, a);
    nrm := sqrt(GREATEST(0, pglogic._dot(a, sims)));
    IF nrm < 1e-9 THEN  -- opposite positive terms: start from the first one
        a := array_fill(0::double precision, ARRAY[n]);
        a[pos[1]] := 1.0;
        nrm := sqrt(gram[(pos[1] - 1) * n + pos[1]]);
    END IF;
    FOR i IN 1 .. n LOOP
        a[i] := a[i] / nrm;
    END LOOP;

    -- log F at the point and at +h and -h on each similarity (rows 0, 1..n, n+1..2n)
    evaluate := format(
        'SELECT array_agg(ln(GREATEST(%s, 1e-12)) ORDER BY r) FROM (SELECT r, %s'
        ' FROM generate_series(0, %s) AS r) AS rows',
        pglogic._score_sql(tree, terms, ops, truth),
        (SELECT string_agg(format('$1[%1$s] + CASE r WHEN %1$s THEN 1e-4::float8 WHEN %2$s'
                                  ' THEN -1e-4::float8 ELSE 0::float8 END AS %3$s',
                                  t, n + t, pglogic._qi('s' || (t - 1))),
                           ', ' ORDER BY t)
         FROM generate_series(1, n) AS t),
        2 * n);
    <<ascent>>
    FOR step IN 0 .. max_steps LOOP
        IF step > 0 THEN
            -- the gradient's tangent part: dF/ds - (grad . x) x, grad . x = dF/ds . G a
            g_x := pglogic._dot(dfds, sims);
            r := ARRAY(SELECT d - g_x * c FROM unnest(dfds, a) WITH ORDINALITY AS u(d, c, o)
                       ORDER BY o);
            IF sqrt(GREATEST(0, pglogic._dot(r, pglogic._gram_times(gram, r)))) < 1e-12 THEN
                EXIT ascent;
            END IF;
            a := ARRAY(SELECT c + lr * d FROM unnest(r, a) WITH ORDINALITY AS u(d, c, o)
                       ORDER BY o);
            nrm := sqrt(GREATEST(0, pglogic._dot(a, pglogic._gram_times(gram, a))));
            a := ARRAY(SELECT c / nrm FROM unnest(a) WITH ORDINALITY AS u(c, o) ORDER BY o);
        END IF;
        sims := pglogic._gram_times(gram, a);
        EXECUTE evaluate INTO f USING sims;
        -- dF/ds by central differences; the gradient is sum dF/ds_i u_i
        dfds := ARRAY(SELECT (f[t + 1] - f[n + t + 1]) / (2 * h) FROM generate_series(1, n) AS t
                      ORDER BY t);
        IF step = 0 THEN
            best_a := a;
            best_f := f[1];
        ELSIF f[1] > best_f + tol THEN
            best_a := a;
            best_f := f[1];
            stale := 0;
        ELSE
            stale := stale + 1;
            EXIT ascent WHEN stale >= patience;
        END IF;
    END LOOP;
    RETURN ARRAY(SELECT sum(m * best_a[(o - 1) / dim + 1])
                 FROM unnest(mat) WITH ORDINALITY AS u(m, o)
                 GROUP BY (o - 1) % dim ORDER BY (o - 1) % dim)::real[]::vector;
END
$fn$;

-- the plan ----------------------------------------------------------------------------------

-- Everything pglogic.search runs, decided as pglogic.store.search.search and
-- pglogic.engine.compile.compile_query decide it (fuzzy mode): the filter estimate and the
-- choice of the exact plan (pglogic.engine.plans.prefer_exact), the plan, its depths and hnsw
-- settings, the guide vector, and the statement, text for text the compiler's with its
-- placeholders numbered: $1[i] the i-th term's vector (%(v{i-1})s), $2 the guide vector
-- (%(vg)s), $3 depth, $4 gdepth, $5 k, $6[j] the j-th filter parameter (text).
CREATE OR REPLACE FUNCTION pglogic._plan(
    corpus text,
    query jsonb,
    OUT statement text,
    OUT exact_statement text,
    OUT plan text,
    OUT terms text[],
    OUT candidate_terms text[],
    OUT vectors vector[],
    OUT guide vector,
    OUT depth integer,
    OUT gdepth integer,
    OUT k integer,
    OUT filter_values text[],
    OUT settings jsonb,
    OUT selectivity double precision,
    OUT matching_rows double precision,
    OUT operators text,
    OUT truth text
)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    allowed constant text[] := ARRAY['tree', 'operators', 'truth', 'k', 'exact', 'depth',
                                     'ef_search', 'iterative_scan', 'guide', 'term_scans',
                                     'filters'];
    c record;
    cal record;
    existing text;
    tree jsonb;
    opts jsonb;
    key text;
    ops text[];
    collected jsonb;
    entry jsonb;
    vec vector;
    exact boolean;
    user_depth integer;
    ef integer;
    iterative boolean;
    server_iterative boolean;
    use_guide boolean;
    given_guide jsonb;
    term_scans boolean;
    filtered boolean;
    cond text;
    est_cond text;
    est record;
    pages bigint;
    rows_est double precision;
    n_terms integer;
    single boolean;
    guided boolean;
    guide_only boolean;
    union_plan boolean;
    scan integer;
    want integer;
    tbl text;
    emb text;
    sims text;
    final text;
    score text;
    cols text;
    scans text[] := '{}';
    positive text[];
    ctes text[] := '{}';
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

    -- options (pglogic.engine.options.SearchOptions)
    k := pglogic._int_option(opts, 'k', 10);
    IF k < 1 THEN
        RAISE EXCEPTION 'Invalid k=%: must be at least 1', k USING ERRCODE = '22023';
    END IF;
    ops := pglogic._resolve_operators(opts -> 'operators');
    operators := format('and=%s,or=%s,not=%s', ops[1], ops[2], ops[3]);
    truth := pglogic._resolve_truth(opts -> 'truth');
    IF truth = 'calibrated' THEN
        -- the corpus's own parameters first, else those of its model (pglogic.calibration_store)
        SELECT cl.tau, cl.lam INTO cal FROM pglogic.calibration cl
        WHERE cl.model = c.model AND (cl.corpus_id = c.id OR cl.corpus_id IS NULL)
        ORDER BY cl.corpus_id NULLS LAST LIMIT 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'No calibration stored for corpus % (model %): run ''pglogic '
                'calibrate DATASET --save'' (labelled data) or ''pglogic calibrate --from-corpus '
                '% --save'' first, or give truth sigmoid:TAU:LAMBDA', quote_literal(corpus),
                quote_literal(c.model), corpus USING ERRCODE = '42704';
        END IF;
        truth := format('sigmoid:%s:%s', pglogic._float_text(cal.tau),
                        pglogic._float_text(cal.lam));
    END IF;
    exact := pglogic._bool_option(opts, 'exact', false);
    iterative := pglogic._bool_option(opts, 'iterative_scan', true);
    user_depth := pglogic._int_option(opts, 'depth', NULL);
    ef := pglogic._int_option(opts, 'ef_search', NULL);
    term_scans := pglogic._bool_option(opts, 'term_scans', NULL);
    given_guide := opts -> 'guide';
    IF given_guide IS NULL OR jsonb_typeof(given_guide) IN ('null', 'boolean') THEN
        use_guide := pglogic._bool_option(opts, 'guide', true);
        given_guide := NULL;
    ELSIF jsonb_typeof(given_guide) IN ('array', 'string') THEN
        use_guide := true;
    ELSE
        RAISE EXCEPTION 'Invalid guide=%: expected true, false or the guide vector (an array '
            'of numbers)', pglogic._show(given_guide) USING ERRCODE = '22023';
    END IF;

    collected := pglogic._collect_terms(tree, true, '[]', 1);
    terms := ARRAY(SELECT x.e ->> 'term' FROM jsonb_array_elements(collected)
                   WITH ORDINALITY AS x(e, n) ORDER BY x.n);
    candidate_terms := ARRAY(SELECT x.e ->> 'term' FROM jsonb_array_elements(collected)
                             WITH ORDINALITY AS x(e, n)
                             WHERE (x.e ->> 'positive')::boolean ORDER BY x.n);
    n_terms := cardinality(terms);
    single := jsonb_typeof(tree) = 'string' OR tree ? 'term';

    SELECT f.condition, f.params INTO cond, filter_values
    FROM pglogic._filters_sql(opts -> 'filters', '"d"."metadata"', 6) AS f;
    filtered := cardinality(filter_values) > 0;

    tbl := format('%s.%s', pglogic._qi('pglogic'), pglogic._qi(c.table_name));
    emb := '"d".' || pglogic._qi(c.column_name);

    -- pglogic.store.search.search: a filter's estimate (pglogic.store.search.estimate_filter:
    -- a 1,000-page sample), and the exact plan where it is cheaper (plans.prefer_exact)
    IF filtered AND NOT exact THEN
        SELECT GREATEST(1, cl.relpages), GREATEST(0.0, cl.reltuples::text::double precision)
        INTO pages, rows_est FROM pg_class cl WHERE cl.oid = (tbl)::regclass;
        SELECT f.condition INTO est_cond
        FROM pglogic._filters_sql(opts -> 'filters', '"d"."metadata"', 2) AS f;
        EXECUTE format('SELECT count(*) FILTER (WHERE %s) AS hits, count(*) AS total FROM %s "d"'
                       ' TABLESAMPLE SYSTEM ($1) REPEATABLE (0)', est_cond, tbl)
            INTO est USING LEAST(100::double precision, 100000 / pages::double precision), filter_values;
        IF est.total = 0 THEN
            selectivity := 1.0;
            matching_rows := rows_est;
        ELSE
            -- at least one match in the sample's worth, so a rare filter never looks impossible
            selectivity := GREATEST(est.hits, 1)::double precision / est.total::double precision;
            matching_rows := selectivity * GREATEST(rows_est, est.total::double precision);
        END IF;
        IF cardinality(candidate_terms) > 0 AND user_depth IS NULL AND pglogic._prefer_exact(
            matching_rows, k, cardinality(candidate_terms),
            CASE WHEN single THEN 'union'
                 WHEN use_guide AND n_terms >= 2
                      AND coalesce(NOT term_scans, pglogic._guide_suffices(tree)) THEN 'guide'
                 WHEN use_guide AND term_scans IS NULL
                      AND pglogic._union_suffices(tree, ops[2]) THEN 'union'
                 ELSE 'terms' END,
            selectivity) THEN
            exact := true;  -- so few rows pass: scoring them all is cheaper
        END IF;
    END IF;

    -- pglogic.engine.compile: the shared parts
    sims := (SELECT string_agg(format(
                 'coalesce(nullif(1 - (%s <=> $1[%s]::vector(%s)), ''NaN''), 0) AS %s',
                 emb, n, c.dim, pglogic._qi('s' || (n - 1))), ', ' ORDER BY n)
             FROM generate_series(1, n_terms) AS n);
    cols := (SELECT string_agg(pglogic._qi('s' || (n - 1)), ', ' ORDER BY n)
             FROM generate_series(1, n_terms) AS n);
    score := pglogic._score_sql(tree, terms, ops, truth);
    final := format(
        'SELECT "d"."id", "d"."external_id", "d"."title", "d"."metadata", top.score, %s' || E'\n'
        || 'FROM (SELECT "id", %s AS score, %s FROM "sims" ORDER BY score DESC, "id" LIMIT $5) top'
        || ' JOIN %s "d" ON "d"."id" = top."id"' || E'\n' || 'ORDER BY top.score DESC, top."id"',
        (SELECT string_agg('top.' || pglogic._qi('s' || (n - 1)), ', ' ORDER BY n)
         FROM generate_series(1, n_terms) AS n),
        score, cols, tbl);
    exact_statement := format(
        'WITH sims AS (SELECT "d"."id", %s FROM %s "d" WHERE %s IS NOT NULL AND %s)' || E'\n' || '%s',
        sims, tbl, emb, cond, final);
    -- (as the compiler: never a generic plan for a prepared copy of the statement)
    settings := '{"plan_cache_mode": "force_custom_plan"}';
    IF exact THEN
        plan := 'exact';
        statement := exact_statement;
        exact_statement := NULL;
        candidate_terms := '{}';
    END IF;

    vectors := '{}';
    FOR i IN 1 .. n_terms LOOP
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
    IF exact THEN
        RETURN;
    END IF;

    IF cardinality(candidate_terms) = 0 THEN
        RAISE EXCEPTION 'The query has no positive term to find candidates with (every term '
            'is negated); set "exact": true to scan every document' USING ERRCODE = '22023';
    END IF;
    IF NOT filtered THEN
        exact_statement := NULL;  -- (the exact fallback is for filtered scans)
    END IF;

    -- pglogic.engine.compile._depths: the plan's scans and depths
    IF k > 1000 THEN
        RAISE EXCEPTION 'k=% is above 1000, the most an HNSW scan returns; set "exact": true',
            k USING ERRCODE = '22023';
    END IF;
    SELECT coalesce((regexp_match(x.extversion, '^(\d+)\.(\d+)'))::integer[]
                    >= ARRAY[0, 8], false)
    INTO server_iterative FROM pg_extension x WHERE x.extname = 'vector';
    iterative := coalesce(server_iterative, false) AND iterative;
    depth := GREATEST(coalesce(user_depth,
                               pglogic._default_depth(k, cardinality(candidate_terms))), k);
    guided := use_guide AND n_terms > 1;
    guide_only := guided AND n_terms >= 2
        AND coalesce(NOT term_scans, pglogic._guide_suffices(tree));
    union_plan := guided AND term_scans IS NULL AND pglogic._union_suffices(tree, ops[2]);
    IF union_plan THEN  -- each term's top k, at a single-term query's ef_search; no guide
        guided := false;
        depth := coalesce(user_depth, k);
    END IF;
    gdepth := coalesce(user_depth, pglogic._guide_depth(k, depth));
    IF guide_only AND user_depth IS NULL THEN
        gdepth := pglogic._guide_only_depth(k, CASE WHEN filtered THEN selectivity END);
    END IF;
    scan := CASE WHEN guide_only THEN gdepth WHEN guided THEN GREATEST(depth, gdepth)
                 ELSE depth END;
    IF scan > 1000 AND NOT iterative THEN
        RAISE EXCEPTION 'depth=% is above 1000 without iterative scans', depth
            USING ERRCODE = '22023';
    END IF;

    -- pglogic.engine.compile._session_settings: hnsw.ef_search and hnsw.iterative_scan
    IF ef IS NULL THEN
        ef := LEAST(1000, GREATEST(40, CASE WHEN union_plan AND user_depth IS NULL
                                            THEN pglogic._default_depth(k, 1) ELSE scan END));
        IF filtered AND NOT iterative THEN
            -- over-fetch (pgvector < 0.8): the scan stops after ef_search tuples, the filter
            -- applies to those: ask for depth / selectivity of them
            want := CASE WHEN union_plan AND user_depth IS NULL THEN pglogic._default_depth(k, 1)
                         WHEN guide_only THEN scan ELSE depth END;
            ef := LEAST(1000, GREATEST(ef, CASE WHEN selectivity > 0
                                               THEN ceil(want / selectivity) ELSE 1000 END));
        END IF;
    END IF;
    IF ef < 1 OR ef > 1000 THEN
        RAISE EXCEPTION 'Invalid ef_search=%: pgvector accepts 1 to 1000', ef
            USING ERRCODE = '22023';
    END IF;
    settings := settings || jsonb_build_object('hnsw.ef_search', ef::text);
    IF iterative AND (filtered OR scan > ef) THEN
        settings := settings || jsonb_build_object('hnsw.iterative_scan', 'relaxed_order');
    END IF;

    -- the statement: one k-NN scan (a single term), or the candidate scans and their union
    IF single THEN
        plan := 'knn';
        statement := format(
            'WITH sims AS MATERIALIZED (SELECT "d"."id", %s FROM %s "d" WHERE %s IS NOT NULL AND %s'
            ' ORDER BY %s <=> $1[1]::vector(%s) LIMIT $5)' || E'\n' || '%s',
            sims, tbl, emb, cond, emb, c.dim, final);
        depth := NULL;
        gdepth := NULL;
        RETURN;
    END IF;
    positive := candidate_terms;
    IF guide_only THEN
        plan := 'guide';
        depth := NULL;
        candidate_terms := '{}';
    ELSE
        plan := CASE WHEN union_plan THEN 'union' ELSE 'terms' END;
        FOREACH key IN ARRAY candidate_terms LOOP
            j := array_position(terms, key);
            scans := scans || ARRAY[pglogic._qi('c' || (j - 1)), format('$1[%s]', j), '$3'];
        END LOOP;
    END IF;
    IF guided THEN
        scans := scans || ARRAY['"g"', '$2', '$4'];
        IF given_guide IS NULL THEN
            guide := pglogic._guide_vector(tree, terms, positive, vectors, ops, truth);
        ELSE
            guide := CASE WHEN jsonb_typeof(given_guide) = 'array' THEN given_guide::text::vector
                          ELSE (given_guide #>> '{}')::vector END;
            IF vector_dims(guide) <> c.dim THEN
                RAISE EXCEPTION 'The guide vector has % dimensions; corpus % needs % (model %)',
                    vector_dims(guide), quote_literal(corpus), c.dim, quote_literal(c.model)
                    USING ERRCODE = '22023';
            END IF;
        END IF;
    ELSE
        gdepth := NULL;
    END IF;
    FOR i IN 1 .. cardinality(scans) / 3 LOOP
        ctes := ctes || format(
            '%s AS MATERIALIZED (SELECT "d"."id", %s FROM %s "d" WHERE %s IS NOT NULL AND %s'
            ' ORDER BY %s <=> %s::vector(%s) LIMIT %s)',
            scans[3 * i - 2], sims, tbl, emb, cond, emb, scans[3 * i - 1], c.dim, scans[3 * i]);
    END LOOP;
    statement := format(
        'WITH %s,' || E'\n' || 'sims AS (%s)' || E'\n' || '%s',
        array_to_string(ctes, E',\n'),
        (SELECT string_agg(format('SELECT "id", %s FROM %s', cols, scans[3 * n - 2]), ' UNION '
                           ORDER BY n)
         FROM generate_series(1, cardinality(scans) / 3) AS n),
        final);
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
    -- the statement's rows (its columns, then the similarities as one JSON object), best first
    wrap constant text := 'SELECT array_agg(r."id" ORDER BY r.score DESC, r."id"),'
        ' array_agg(r."external_id" ORDER BY r.score DESC, r."id"),'
        ' array_agg(r."title" ORDER BY r.score DESC, r."id"),'
        ' array_agg(r."metadata" ORDER BY r.score DESC, r."id"),'
        ' array_agg(r.score ORDER BY r.score DESC, r."id"),'
        ' array_agg((SELECT jsonb_object_agg(u.term, u.sim) FROM unnest($7::text[], ARRAY[%s])'
        ' AS u(term, sim)) ORDER BY r.score DESC, r."id") FROM (%s) r';
    sims text;
    ids bigint[];
    external_ids text[];
    titles text[];
    metadatas jsonb[];
    scores double precision[];
    similarity jsonb[];
BEGIN
    SELECT * INTO p FROM pglogic._plan(corpus, query);
    sims := (SELECT string_agg(format('r.%s', pglogic._qi('s' || (n - 1))), ', ' ORDER BY n)
             FROM generate_series(1, cardinality(p.terms)) AS n);
    -- SET LOCAL (set_config(..., true)) for the statement, then back to the caller's values
    FOR s IN SELECT x.key, x.value FROM jsonb_each_text(p.settings) AS x LOOP
        saved := saved || jsonb_build_object(s.key, current_setting(s.key, true));
        PERFORM set_config(s.key, s.value, true);
    END LOOP;
    EXECUTE format(wrap, sims, p.statement)
        INTO ids, external_ids, titles, metadatas, scores, similarity
        USING p.vectors, p.guide, p.depth, p.gdepth, p.k, p.filter_values, p.terms;
    IF p.exact_statement IS NOT NULL AND coalesce(cardinality(ids), 0) < p.k THEN
        -- The filtered index scans found fewer than k rows (a rare filter, a scan that stopped
        -- at hnsw.max_scan_tuples or at ef_search without iterative scans): score every
        -- matching row instead, as pglogic.store.search.search does.
        EXECUTE format(wrap, sims, p.exact_statement)
            INTO ids, external_ids, titles, metadatas, scores, similarity
            USING p.vectors, p.guide, p.depth, p.gdepth, p.k, p.filter_values, p.terms;
    END IF;
    FOR s IN SELECT x.key, x.value FROM jsonb_each_text(saved) AS x WHERE x.value IS NOT NULL LOOP
        PERFORM set_config(s.key, s.value, true);
    END LOOP;
    RETURN QUERY
        SELECT u.id, u.external_id, u.title, u.metadata, u.score, u.similarities
        FROM unnest(ids, external_ids, titles, metadatas, scores, similarity)
             WITH ORDINALITY AS u(id, external_id, title, metadata, score, similarities, n)
        ORDER BY u.n;
END
$fn$;

COMMENT ON FUNCTION pglogic.search(text, jsonb) IS
    'Logical semantic search: ranked hits of corpus for a query tree, the plans and ranking of '
    'pglogic.store.search.search in Python. Example: SELECT * FROM pglogic.search(''news'', '
    '''{"tree": {"op": "and", "args": [{"term": "oil"}, {"op": "not", "arg": {"term": "gas"}}]},'
    ' "k": 5}'')';

CREATE OR REPLACE FUNCTION pglogic.search_plan(corpus text, query jsonb)
RETURNS jsonb
LANGUAGE sql STABLE
RETURN (
    SELECT jsonb_build_object(
        'statement', p.statement,
        'exact_fallback', p.exact_statement,
        'parameters', jsonb_build_array('$1 vector[]: the terms'' vectors ($1[i]: term i)',
                                        '$2 vector: the guide vector', '$3 integer: depth',
                                        '$4 integer: gdepth', '$5 integer: k',
                                        '$6 text[]: the filters'' parameters'),
        'plan', p.plan,
        'terms', to_jsonb(p.terms),
        'candidate_terms', to_jsonb(p.candidate_terms),
        'guide', CASE WHEN p.guide IS NOT NULL THEN to_jsonb(p.guide::real[]::double precision[]) END,
        'filter_values', to_jsonb(p.filter_values),
        'selectivity', p.selectivity,
        'matching_rows', p.matching_rows,
        'settings', p.settings,
        'k', p.k,
        'depth', p.depth,
        'gdepth', p.gdepth,
        'operators', p.operators,
        'truth', p.truth)
    FROM pglogic._plan(corpus, query) AS p
);

COMMENT ON FUNCTION pglogic.search_plan(text, jsonb) IS
    'What pglogic.search(corpus, query) would run: the plan, statement, parameters, settings. '
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
    EXECUTE format('ALTER FUNCTION pglogic._guide_vector(jsonb, text[], text[], vector[], text[],'
                   ' text) SET search_path = %s', path);
    EXECUTE format('ALTER FUNCTION pglogic.search(text, jsonb) SET search_path = %s', path);
    EXECUTE format('ALTER FUNCTION pglogic.search_plan(text, jsonb) SET search_path = %s', path);
END
$do$;
