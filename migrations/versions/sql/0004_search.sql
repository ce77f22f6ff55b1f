-- Revision 0004: the statements of sql/search.sql that are new or changed since the revision before, written
-- by migrations/sqlfiles.py; frozen: never edit it. It runs between the file's DO blocks (applied).

-- A double precision number as Python's repr() writes it (pglogic.operators._const_text): the
-- shortest text that reads back as the same number, with ".0" on integral values and a
-- fixed-point form up to 1e16, so that constants render text for text like the Python compiler.
CREATE OR REPLACE FUNCTION pglogic._float_text(x double precision)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET extra_float_digits = 1  -- float8 output is then the shortest round trip (PostgreSQL >= 12)
AS $fn$
DECLARE
    t text := x::text;
    m text[];
    digits text;
    p integer;
    r numeric;
    e integer;
    cand text;
    shorter text;
BEGIN
    IF t IN ('NaN', 'Infinity', '-Infinity') THEN
        RETURN CASE t WHEN 'NaN' THEN 'nan' WHEN 'Infinity' THEN 'inf' ELSE '-inf' END;
    END IF;
    -- Some large integral values print with more digits than needed to read back the same;
    -- Python prints the fewest: round to fewer digits while the result still reads back as x.
    m := regexp_match(t, '^(-?)([0-9]\.[0-9]+)e\+([0-9]+)$');
    IF m IS NOT NULL THEN
        digits := replace(m[2], '.', '');
        FOR p IN REVERSE length(digits) - 1 .. 1 LOOP
            r := round(digits::numeric, p - length(digits));
            e := m[3]::integer + length(r::text) - length(digits);
            cand := rtrim(left(r::text, p + 1), '0');
            cand := m[1] || left(cand, 1) || coalesce(nullif('.' || substr(cand, 2), '.'), '')
                || 'e+' || lpad(e::text, 2, '0');
            BEGIN
                EXIT WHEN cand::double precision <> x;
            EXCEPTION WHEN numeric_value_out_of_range THEN
                EXIT;  -- rounded up past the largest double
            END;
            shorter := cand;
        END LOOP;
        t := coalesce(shorter, t);
    END IF;
    -- PostgreSQL switches to exponents from 1e15 on, Python from 1e16 on
    m := regexp_match(t, '^(-?)([0-9])(?:\.([0-9]+))?e\+15$');
    IF m IS NOT NULL THEN
        digits := m[2] || coalesce(m[3], '');
        RETURN m[1] || CASE WHEN length(digits) <= 16 THEN rpad(digits, 16, '0') || '.0'
                            ELSE left(digits, 16) || '.' || substr(digits, 17) END;
    END IF;
    IF position('e' IN t) = 0 AND position('.' IN t) = 0 THEN
        RETURN t || '.0';
    END IF;
    RETURN t;
END
$fn$;

-- Resolve a truth map like pglogic.operators.resolve_truth (same validation, same messages):
-- 'clamp', 'affine', 'calibrated' (pglogic._plan looks the parameters up) or
-- 'sigmoid:TAU:LAMBDA' with both numbers written as pglogic._float_text writes them.
CREATE OR REPLACE FUNCTION pglogic._resolve_truth(spec jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    -- Python's float() syntax (lower case): digits with single underscores between them
    number constant text := '^[+-]?((([0-9](_?[0-9])*)?\.[0-9](_?[0-9])*|[0-9](_?[0-9])*\.?)'
        '(e[+-]?[0-9](_?[0-9])*)?|inf|infinity|nan)$';
    raw text;
    name text;
    parts text[];
    num text;
    v double precision;
    vals double precision[] := '{}';
    big boolean;
BEGIN
    IF spec IS NULL OR jsonb_typeof(spec) = 'null' THEN
        RETURN 'clamp';
    END IF;
    IF jsonb_typeof(spec) = 'string' THEN
        raw := spec #>> '{}';
        name := lower(btrim(raw));
        IF name = '' THEN
            RETURN 'clamp';
        END IF;
        IF name IN ('clamp', 'affine', 'calibrated') THEN
            RETURN name;
        END IF;
        parts := string_to_array(name, ':');
        IF cardinality(parts) = 3 AND parts[1] = 'sigmoid' THEN
            FOREACH num IN ARRAY parts[2:3] LOOP
                num := regexp_replace(num, '^\s+|\s+$', '', 'g');
                IF num !~ number THEN
                    RAISE EXCEPTION
                        'Invalid truth map %: expected sigmoid:TAU:LAMBDA with two numbers',
                        quote_literal(raw) USING ERRCODE = '22023';
                END IF;
                num := replace(num, '_', '');
                IF num ~ 'inf|nan' THEN
                    v := CASE WHEN num ~ 'nan' THEN 'NaN'::double precision
                              WHEN num ~ '^-' THEN '-Infinity' ELSE 'Infinity' END;
                ELSE
                    BEGIN
                        v := num::double precision;
                    EXCEPTION WHEN numeric_value_out_of_range THEN
                        -- Python's float() rounds to an infinity or to zero instead
                        BEGIN
                            big := abs(num::numeric) >= 1;
                        EXCEPTION WHEN numeric_value_out_of_range THEN
                            big := num !~ 'e-';
                        END;
                        v := CASE WHEN big THEN 'Infinity'::double precision ELSE 0 END;
                        IF num ~ '^-' THEN
                            v := -v;
                        END IF;
                    END;
                END IF;
                vals := vals || v;
            END LOOP;
            IF vals[1] IN ('Infinity', '-Infinity', 'NaN')
               OR vals[2] IN ('Infinity', '-Infinity', 'NaN') OR NOT vals[2] > 0 THEN
                RAISE EXCEPTION 'A sigmoid truth map needs a finite tau and lambda > 0, got %, %',
                    pglogic._float_text(vals[1]), pglogic._float_text(vals[2])
                    USING ERRCODE = '22023';
            END IF;
            RETURN format('sigmoid:%s:%s', pglogic._float_text(vals[1]),
                          pglogic._float_text(vals[2]));
        END IF;
    END IF;
    RAISE EXCEPTION 'Unknown truth map %: valid names are clamp, affine, or sigmoid:TAU:LAMBDA',
        CASE WHEN jsonb_typeof(spec) = 'string' THEN quote_literal(spec #>> '{}') ELSE spec::text END
        USING ERRCODE = '22023';
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
    cal record;
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
