-- Revision 0006: the statements of sql/search.sql that are new or changed since the revision before, written
-- by migrations/sqlfiles.py; frozen: never edit it. It runs between the file's DO blocks (applied).

CREATE OR REPLACE FUNCTION pglogic._check_operator(kind text, name text, spec text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    valid text[] := CASE kind
        WHEN 'and' THEN ARRAY['product', 'sum', 'min', 'lukasiewicz']
        WHEN 'or' THEN ARRAY['sum', 'max', 'probsum', 'lukasiewicz']
        WHEN 'not' THEN ARRAY['complement', 'reciprocal']
    END;
    g double precision;
BEGIN
    -- since migration 0006: the NOT (1 - x)^G (pglogic.engine.operators.complement_power)
    IF kind = 'not' AND name ~ '^complement\^[0-9]*\.?[0-9]+(e[-+]?[0-9]+)?$' THEN
        g := substr(name, 12)::double precision;
        IF NOT (g > 0 AND g <= 100) THEN
            RAISE EXCEPTION 'The exponent of complement^G must be in (0, 100], got % in operator '
                'family %', pglogic._float_text(g), quote_literal(spec) USING ERRCODE = '22023';
        END IF;
        RETURN CASE WHEN g = 1 THEN 'complement' ELSE 'complement^' || pglogic._float_text(g) END;
    END IF;
    IF valid IS NULL THEN
        RAISE EXCEPTION 'Unknown operator kind % in operator family %: expected and, or, not',
            quote_literal(kind), quote_literal(spec) USING ERRCODE = '22023';
    END IF;
    IF name IS NULL OR NOT name = ANY (valid) THEN
        RAISE EXCEPTION 'Unknown % operator % in operator family %: valid % operators are %',
            upper(kind), coalesce(quote_literal(name), 'null'), quote_literal(spec), upper(kind),
            array_to_string(valid, ', ')
            || CASE WHEN kind = 'not' THEN ', complement^G (G > 0)' ELSE '' END
            USING ERRCODE = '22023';
    END IF;
    RETURN name;
END
$fn$;

-- Resolve an operator family like pglogic.operators.resolve_family: returns {and, or, not}.
-- Since migration 0003 the default (and the fill-in for partial specs) is product-max; since
-- migration 0006 it is product-max-strong (NOT (1 - x)^1.25).
CREATE OR REPLACE FUNCTION pglogic._resolve_operators(spec jsonb)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    usage constant text := 'use a preset (product-max-strong, product-max, itlr, godel, '
        'lukasiewicz, product) or and=NAME,or=NAME,not=NAME with AND in {product, sum, min, '
        'lukasiewicz}, OR in {sum, max, probsum, lukasiewicz}, NOT in {complement, reciprocal, '
        'complement^G}';
    dflt constant text[] := ARRAY['product', 'max', 'complement^1.25'];
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
    IF txt = '' OR txt = 'product-max-strong' THEN
        RETURN dflt;
    ELSIF txt = 'product-max' THEN
        RETURN ARRAY['product', 'max', 'complement'];
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

-- A formula as one natural-language string, text for text pglogic.query.to_text: AND -> "and",
-- OR -> "or", a NOT under an AND -> "but not" ("and not" right after another negated operand,
-- "not" first), any other NOT -> "not"; parentheses where precedence needs them.
CREATE OR REPLACE FUNCTION pglogic._to_text(node jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    op text;
    kids jsonb[];
    child jsonb;
    inner_ text;
    parts text[] := '{}';
    after_not boolean := false;
    i integer := 0;
BEGIN
    IF jsonb_typeof(node) = 'string' THEN
        RETURN node #>> '{}';
    END IF;
    IF node ? 'term' THEN
        RETURN node ->> 'term';
    END IF;
    op := lower(node ->> 'op');
    IF op = 'not' THEN
        child := coalesce(node -> 'arg', node -> 'args' -> 0);
        inner_ := pglogic._to_text(child);
        RETURN CASE WHEN jsonb_typeof(child) = 'object' AND lower(child ->> 'op') IN ('and', 'or')
                    THEN 'not (' || inner_ || ')' ELSE 'not ' || inner_ END;
    END IF;
    kids := pglogic._flat_args(node, op);
    IF op = 'or' THEN
        RETURN (SELECT string_agg(pglogic._to_text(k), ' or ' ORDER BY n)
                FROM unnest(kids) WITH ORDINALITY AS u(k, n));
    END IF;
    FOREACH child IN ARRAY kids LOOP
        IF jsonb_typeof(child) = 'object' AND lower(child ->> 'op') = 'not' THEN
            inner_ := pglogic._to_text(coalesce(child -> 'arg', child -> 'args' -> 0));
            IF jsonb_typeof(coalesce(child -> 'arg', child -> 'args' -> 0)) = 'object'
               AND lower(coalesce(child -> 'arg', child -> 'args' -> 0) ->> 'op') IN ('and', 'or') THEN
                inner_ := '(' || inner_ || ')';
            END IF;
            parts := parts || (CASE WHEN i = 0 THEN 'not' WHEN after_not THEN 'and not'
                                    ELSE 'but not' END || ' ' || inner_);
            after_not := true;
        ELSE
            inner_ := pglogic._to_text(child);
            IF jsonb_typeof(child) = 'object' AND lower(child ->> 'op') = 'or' THEN
                inner_ := '(' || inner_ || ')';
            END IF;
            parts := parts || CASE WHEN i = 0 THEN inner_ ELSE 'and ' || inner_ END;
            after_not := false;
        END IF;
        i := i + 1;
    END LOOP;
    RETURN array_to_string(parts, ' ');
END
$fn$;

-- The operands of an AND or OR node with nested nodes of the same operator spliced in
-- (pglogic.query.ast.flatten).
CREATE OR REPLACE FUNCTION pglogic._flat_args(node jsonb, op text)
RETURNS jsonb[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    out_ jsonb[] := '{}';
    child jsonb;
BEGIN
    FOR child IN SELECT a.value FROM jsonb_array_elements(node -> 'args') WITH ORDINALITY AS a
                 ORDER BY a.ordinality LOOP
        IF jsonb_typeof(child) = 'object' AND lower(child ->> 'op') = op THEN
            out_ := out_ || pglogic._flat_args(child, op);
        ELSE
            out_ := out_ || child;
        END IF;
    END LOOP;
    RETURN out_;
END
$fn$;

-- The phrase of an AND node's positive operands when it has two or more, else null
-- (pglogic.engine.conjunction._phrase).
CREATE OR REPLACE FUNCTION pglogic._and_phrase(node jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (SELECT CASE WHEN count(*) >= 2
                    THEN pglogic._to_text(jsonb_build_object('op', 'and',
                                          'args', jsonb_agg(a.value ORDER BY a.ordinality)))
               END
        FROM jsonb_array_elements(node -> 'args') WITH ORDINALITY AS a
        WHERE jsonb_typeof(a.value) <> 'object' OR coalesce(lower(a.value ->> 'op'), '') <> 'not');

-- The scored texts (pglogic.engine.conjunction.scored_terms): acc (the query's terms), then the
-- phrase of every AND with two or more positive operands, in tree order, each once.
CREATE OR REPLACE FUNCTION pglogic._and_texts(node jsonb, acc text[])
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    op text;
    phrase text;
    child jsonb;
BEGIN
    IF jsonb_typeof(node) <> 'object' OR node ? 'term' THEN
        RETURN acc;
    END IF;
    op := lower(node ->> 'op');
    IF op = 'not' THEN
        RETURN pglogic._and_texts(coalesce(node -> 'arg', node -> 'args' -> 0), acc);
    END IF;
    IF op = 'and' THEN
        phrase := pglogic._and_phrase(node);
        IF phrase IS NOT NULL AND NOT phrase = ANY (acc) THEN
            acc := acc || phrase;
        END IF;
    END IF;
    FOR child IN SELECT a.value FROM jsonb_array_elements(node -> 'args') WITH ORDINALITY AS a
                 ORDER BY a.ordinality LOOP
        acc := pglogic._and_texts(child, acc);
    END LOOP;
    RETURN acc;
END
$fn$;

-- A similarity column through the truth map (pglogic.engine.operators.TRUTH_MAPS, sigmoid_truth).
CREATE OR REPLACE FUNCTION pglogic._truth_sql(x text, truth text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN truth LIKE 'sigmoid:%' THEN  -- pglogic.operators.sigmoid_truth, EXP_CAP = 700
        format('(1.0 / (1.0 + exp(LEAST(700.0, GREATEST(-700.0, ((%s - %s) * %s))))))',
               split_part(truth, ':', 2), x, split_part(truth, ':', 3))
    WHEN truth = 'clamp' THEN format('GREATEST(0.0, LEAST(1.0, %s))', x)
    WHEN truth = 'affine' THEN format('((%s + 1.0) / 2.0)', x)
END;

-- The score expression of a (validated) tree, text for text what pglogic.operators.to_sql
-- renders for pglogic.engine.conjunction.with_and_texts(tree, and_text): the same operations in
-- the same order, so scores are bit for bit the same. Since migration 0006: the NOT
-- complement^G, and each AND's phrase (a scored text of terms[]) joining the AND and_text times,
-- once beside a negated operand.
DROP FUNCTION IF EXISTS pglogic._score_sql(jsonb, text[], text[], text);

CREATE OR REPLACE FUNCTION pglogic._score_sql(
    node jsonb, terms text[], ops text[], truth text, and_text integer DEFAULT 0
)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    op text;
    x text;
    phrase text;
    parts text[] := '{}';
    beside_not boolean;
    i integer;
BEGIN
    IF jsonb_typeof(node) = 'string' THEN
        node := jsonb_build_object('term', node);
    END IF;
    IF node ? 'term' THEN
        RETURN pglogic._truth_sql(
            pglogic._qi('s' || (array_position(terms, node ->> 'term') - 1)), truth);
    END IF;
    op := lower(node ->> 'op');
    IF op = 'not' THEN
        x := pglogic._score_sql(coalesce(node -> 'arg', node -> 'args' -> 0), terms, ops, truth,
                                and_text);
        RETURN CASE ops[3]
            WHEN 'complement' THEN format('(1.0 - %s)', x)
            WHEN 'reciprocal' THEN format('(1.0 / GREATEST(%s, 1e-06))', x)
            ELSE format('power(GREATEST((1.0 - %s), 0.0), %s)', x, substr(ops[3], 12))
        END;
    END IF;
    FOR i IN 0 .. jsonb_array_length(node -> 'args') - 1 LOOP
        parts := parts || pglogic._score_sql(node -> 'args' -> i, terms, ops, truth, and_text);
    END LOOP;
    IF op = 'and' AND and_text > 0 THEN
        phrase := pglogic._and_phrase(node);
        IF phrase IS NOT NULL THEN
            beside_not := EXISTS (SELECT 1 FROM jsonb_array_elements(node -> 'args') AS a
                                  WHERE jsonb_typeof(a.value) = 'object'
                                    AND lower(a.value ->> 'op') = 'not');
            x := pglogic._truth_sql(pglogic._qi('s' || (array_position(terms, phrase) - 1)), truth);
            FOR i IN 1 .. CASE WHEN beside_not THEN 1 ELSE and_text END LOOP
                parts := parts || x;
            END LOOP;
        END IF;
    END IF;
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
                                     'filters', 'and_text', 'vectors'];
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
    and_text integer;
    n_texts integer;
    given jsonb;
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
    -- pglogic.engine.conjunction: the weight of each AND's own text (fuzzy mode, since 0006)
    IF jsonb_typeof(opts -> 'and_text') = 'boolean' THEN
        RAISE EXCEPTION 'Invalid and_text=%: a whole number from 0 to 10',
            pglogic._show(opts -> 'and_text') USING ERRCODE = '22023';
    END IF;
    and_text := pglogic._int_option(opts, 'and_text', 4);
    IF and_text < 0 OR and_text > 10 THEN
        RAISE EXCEPTION 'Invalid and_text=%: a whole number from 0 to 10', and_text
            USING ERRCODE = '22023';
    END IF;
    given := coalesce(opts -> 'vectors', '{}');
    IF jsonb_typeof(given) <> 'object' THEN
        RAISE EXCEPTION 'Invalid vectors=%: expected an object {"text": [numbers], ...}',
            pglogic._show(given) USING ERRCODE = '22023';
    END IF;
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
    IF single THEN
        and_text := 0;
    END IF;
    IF and_text > 0 THEN  -- the scored texts: the terms, then the AND phrases
        terms := pglogic._and_texts(tree, terms);
    END IF;
    n_texts := cardinality(terms);

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
             FROM generate_series(1, n_texts) AS n);
    cols := (SELECT string_agg(pglogic._qi('s' || (n - 1)), ', ' ORDER BY n)
             FROM generate_series(1, n_texts) AS n);
    score := pglogic._score_sql(tree, terms, ops, truth, and_text);
    final := format(
        'SELECT "d"."id", "d"."external_id", "d"."title", "d"."metadata", top.score, %s' || E'\n'
        || 'FROM (SELECT "id", %s AS score, %s FROM "sims" ORDER BY score DESC, "id" LIMIT $5) top'
        || ' JOIN %s "d" ON "d"."id" = top."id"' || E'\n' || 'ORDER BY top.score DESC, top."id"',
        (SELECT string_agg('top.' || pglogic._qi('s' || (n - 1)), ', ' ORDER BY n)
         FROM generate_series(1, n_texts) AS n),
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
    FOR i IN 1 .. n_texts LOOP
        -- a term's vector in the tree; an AND phrase's in "vectors" (or either in the cache)
        entry := CASE WHEN i <= n_terms THEN collected -> (i - 1)
                      ELSE jsonb_build_object('vector', given -> terms[i]) END;
        IF jsonb_typeof(entry -> 'vector') = 'array' THEN
            vec := (entry -> 'vector')::text::vector;
        ELSIF jsonb_typeof(entry -> 'vector') = 'string' THEN
            vec := (entry ->> 'vector')::vector;
        ELSE
            SELECT tc.embedding INTO vec FROM pglogic.term_cache tc
            WHERE tc.model = c.model AND tc.term = terms[i];
            IF NOT FOUND AND i > n_terms THEN
                RAISE EXCEPTION 'The AND text % has no vector: give it in "vectors" (render.'
                    'search_json does), cache it in pglogic.term_cache for model %, or set '
                    '"and_text": 0', quote_literal(terms[i]), quote_literal(c.model)
                    USING ERRCODE = '22023';
            END IF;
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
            -- the user's formula alone: its terms and their vectors (pglogic.engine.guide)
            guide := pglogic._guide_vector(tree, terms[1:n_terms], positive, vectors[1:n_terms],
                                           ops, truth);
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
