-- Revision 0007: the statements of sql/search.sql that are new or changed since the revision before, written
-- by migrations/sqlfiles.py; frozen: never edit it. It runs between the file's DO blocks (applied).

-- the tree ----------------------------------------------------------------------------------

-- Validate a tree and collect its distinct terms in order of first appearance (pre-order, like
-- pglogic.query.terms): [{"term": ..., "positive": bool, "vector": json | null}, ...], and since
-- migration 0007 its distinct lexical terms among them (pglogic.query.matches): {"match": ...,
-- "positive": bool}.
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
        RAISE EXCEPTION 'Invalid query node %: expected {"term": ...}, {"match": ...} or {"op": ...}',
            pglogic._show(node) USING ERRCODE = '22023';
    END IF;
    IF node ? 'match' THEN
        -- a lexical term (since migration 0007): a word or a phrase, nothing else
        IF jsonb_typeof(node -> 'match') <> 'string' OR btrim(node ->> 'match') = '' THEN
            RAISE EXCEPTION 'Invalid lexical term %: "match" takes a word or a phrase (a non-blank '
                'string)', pglogic._show(node -> 'match') USING ERRCODE = '22023';
        END IF;
        IF (SELECT count(*) FROM jsonb_object_keys(node)) > 1 THEN
            RAISE EXCEPTION 'Invalid query node %: a lexical term is {"match": "words"} alone (no '
                'vector, no other key)', pglogic._show(node) USING ERRCODE = '22023';
        END IF;
        t := node ->> 'match';
        FOR i IN 0 .. jsonb_array_length(acc) - 1 LOOP
            IF acc -> i ->> 'match' = t THEN
                RETURN jsonb_set(acc, ARRAY[i::text, 'positive'],
                                 to_jsonb((acc -> i ->> 'positive')::boolean OR positive));
            END IF;
        END LOOP;
        RETURN acc || jsonb_build_array(jsonb_build_object('match', t, 'positive', positive));
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
        RAISE EXCEPTION 'Invalid query node %: expected {"term": ...}, {"match": ...} or {"op": ...}',
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
    IF node ? 'match' THEN
        RETURN node ->> 'match';
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

-- The tree without its lexical terms, or null when nothing else is left (pglogic.query.
-- semantic_part): an AND or OR left with one operand is that operand, a NOT of nothing is nothing.
-- What the guide vector and the AND texts are computed from (since migration 0007).
CREATE OR REPLACE FUNCTION pglogic._semantic_part(node jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    op text;
    child jsonb;
    kept jsonb := '[]';
BEGIN
    IF jsonb_typeof(node) <> 'object' OR node ? 'term' THEN
        RETURN node;
    END IF;
    IF node ? 'match' THEN
        RETURN NULL;
    END IF;
    op := lower(node ->> 'op');
    IF op = 'not' THEN
        child := pglogic._semantic_part(coalesce(node -> 'arg', node -> 'args' -> 0));
        RETURN CASE WHEN child IS NOT NULL THEN jsonb_build_object('op', 'not', 'arg', child) END;
    END IF;
    FOR child IN SELECT pglogic._semantic_part(a.value)
                 FROM jsonb_array_elements(node -> 'args') WITH ORDINALITY AS a
                 ORDER BY a.ordinality LOOP
        IF child IS NOT NULL THEN
            kept := kept || jsonb_build_array(child);
        END IF;
    END LOOP;
    RETURN CASE jsonb_array_length(kept) WHEN 0 THEN NULL WHEN 1 THEN kept -> 0
                ELSE jsonb_build_object('op', op, 'args', kept) END;
END
$fn$;

-- The phrase of an AND node's positive operands when it has two or more, else null
-- (pglogic.engine.conjunction._phrase); since migration 0007 of their semantic parts (lexical
-- terms are left out: the phrase is embedded).
CREATE OR REPLACE FUNCTION pglogic._and_phrase(node jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (SELECT CASE WHEN count(*) >= 2
                    THEN pglogic._to_text(jsonb_build_object('op', 'and',
                                          'args', jsonb_agg(s.part ORDER BY a.ordinality)))
               END
        FROM jsonb_array_elements(node -> 'args') WITH ORDINALITY AS a
        CROSS JOIN LATERAL (SELECT pglogic._semantic_part(a.value) AS part) AS s
        WHERE (jsonb_typeof(a.value) <> 'object' OR coalesce(lower(a.value ->> 'op'), '') <> 'not')
          AND s.part IS NOT NULL);

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
    IF jsonb_typeof(node) <> 'object' OR node ? 'term' OR node ? 'match' THEN
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

CREATE OR REPLACE FUNCTION pglogic._score_sql(
    node jsonb, terms text[], ops text[], truth text, and_text integer DEFAULT 0,
    matches text[] DEFAULT '{}'
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
    IF node ? 'match' THEN
        RETURN pglogic._qi('l' || (array_position(matches, node ->> 'match') - 1));
    END IF;
    op := lower(node ->> 'op');
    IF op = 'not' THEN
        x := pglogic._score_sql(coalesce(node -> 'arg', node -> 'args' -> 0), terms, ops, truth,
                                and_text, matches);
        RETURN CASE ops[3]
            WHEN 'complement' THEN format('(1.0 - %s)', x)
            WHEN 'reciprocal' THEN format('(1.0 / GREATEST(%s, 1e-06))', x)
            ELSE format('power(GREATEST((1.0 - %s), 0.0), %s)', x, substr(ops[3], 12))
        END;
    END IF;
    FOR i IN 0 .. jsonb_array_length(node -> 'args') - 1 LOOP
        parts := parts || pglogic._score_sql(node -> 'args' -> i, terms, ops, truth, and_text,
                                             matches);
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
    IF jsonb_typeof(node) = 'string' OR node ? 'term' OR node ? 'match' THEN
        -- (since migration 0007 a lexical term too: a positive one needs a scan of its own)
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

-- Whether a node is a term or an OR of such disjunctions.
CREATE OR REPLACE FUNCTION pglogic._disjunction(node jsonb)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
BEGIN
    IF jsonb_typeof(node) = 'string' OR node ? 'term' THEN
        RETURN true;
    END IF;
    IF node ? 'match' OR lower(node ->> 'op') <> 'or' THEN
        RETURN false;
    END IF;
    RETURN (SELECT bool_and(pglogic._disjunction(a.e))
            FROM jsonb_array_elements(node -> 'args') AS a(e));
END
$fn$;

-- the plan ----------------------------------------------------------------------------------

-- Everything pglogic.search runs, decided as pglogic.store.search.search and
-- pglogic.engine.compile.compile_query decide it (fuzzy mode): the filter estimate and the
-- choice of the exact plan (pglogic.engine.plans.prefer_exact), the plan, its depths and hnsw
-- settings, the guide vector, and the statement, text for text the compiler's with its
-- placeholders numbered: $1[i] the i-th term's vector (%(v{i-1})s), $2 the guide vector
-- (%(vg)s), $3 depth, $4 gdepth, $5 k, $6[j] the j-th filter parameter (text), and since
-- migration 0007 $7 the text search configuration of the corpus's lexical index (%(lcfg)s,
-- text) and $8[j] the j-th lexical term (%(q{j-1})s, text).
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
    OUT truth text,
    OUT lexical text[],
    OUT candidate_lexical text[],
    OUT lexical_truth text,
    OUT text_config text
)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    allowed constant text[] := ARRAY['tree', 'operators', 'truth', 'k', 'exact', 'depth',
                                     'ef_search', 'iterative_scan', 'guide', 'term_scans',
                                     'filters', 'and_text', 'vectors', 'lexical', 'mode'];
    tsv constant text := '"d"."tsv"';  -- pglogic.engine.compile.LEXICAL_COLUMN
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
    mode text;
    bad text;
    sim_items text[];
    sim_names text[];
    tsq text;
BEGIN
    SELECT co.id, co.table_name, e.model, e.dim, e.column_name,
           (SELECT l.config FROM pglogic.lexical_indexes l WHERE l.corpus_id = co.id)
           AS lexical_config INTO c
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
    ELSIF query ? 'op' OR query ? 'term' OR query ? 'match' THEN
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
    -- since migration 0007: a lexical term's truth (pglogic.engine.options.LEXICAL), the mode
    lexical_truth := coalesce(nullif(opts -> 'lexical', 'null') #>> '{}', 'crisp');
    IF jsonb_typeof(opts -> 'lexical') NOT IN ('string', 'null')
       OR NOT lexical_truth = ANY (ARRAY['crisp', 'rank']) THEN
        RAISE EXCEPTION 'Unknown lexical truth %: valid values are crisp, rank',
            CASE WHEN jsonb_typeof(opts -> 'lexical') = 'string' THEN quote_literal(lexical_truth)
                 ELSE pglogic._show(opts -> 'lexical') END USING ERRCODE = '22023';
    END IF;
    mode := coalesce(nullif(opts -> 'mode', 'null') #>> '{}', 'fuzzy');
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
    -- the lexical terms (pglogic.query.matches, positive_matches), then the terms alone
    lexical := ARRAY(SELECT x.e ->> 'match' FROM jsonb_array_elements(collected)
                     WITH ORDINALITY AS x(e, n) WHERE x.e ? 'match' ORDER BY x.n);
    candidate_lexical := ARRAY(SELECT x.e ->> 'match' FROM jsonb_array_elements(collected)
                               WITH ORDINALITY AS x(e, n)
                               WHERE x.e ? 'match' AND (x.e ->> 'positive')::boolean ORDER BY x.n);
    collected := coalesce((SELECT jsonb_agg(x.e ORDER BY x.n) FROM jsonb_array_elements(collected)
                           WITH ORDINALITY AS x(e, n) WHERE x.e ? 'term'), '[]');
    terms := ARRAY(SELECT x.e ->> 'term' FROM jsonb_array_elements(collected)
                   WITH ORDINALITY AS x(e, n) ORDER BY x.n);
    candidate_terms := ARRAY(SELECT x.e ->> 'term' FROM jsonb_array_elements(collected)
                             WITH ORDINALITY AS x(e, n)
                             WHERE (x.e ->> 'positive')::boolean ORDER BY x.n);
    n_terms := cardinality(terms);
    -- the SQL function has the fuzzy mode only (pglogic.engine.render.search_json)
    IF mode <> 'fuzzy' OR jsonb_typeof(opts -> 'mode') NOT IN ('string', 'null') THEN
        mode := CASE WHEN jsonb_typeof(opts -> 'mode') = 'string' THEN quote_literal(mode)
                     ELSE pglogic._show(opts -> 'mode') END;
        IF cardinality(lexical) > 0 THEN  -- pglogic.engine.compile._check_lexical
            RAISE EXCEPTION 'Lexical terms (match:...) are scored in the fuzzy mode only, not in '
                'mode %', mode USING ERRCODE = '22023';
        END IF;
        RAISE EXCEPTION 'pglogic.search (SQL) has the fuzzy mode only, not %', mode
            USING ERRCODE = '22023';
    END IF;
    IF cardinality(lexical) > 0 THEN
        -- the corpus's lexical index (pglogic.store.lexical), and a searchable word in each term
        -- (pglogic.store.search.check_lexical_terms)
        IF c.lexical_config IS NULL THEN
            RAISE EXCEPTION 'match:"%" needs a lexical index, and corpus % has none: add it with '
                '`pglogic corpus lexical %`', replace(replace(lexical[1], '\', '\\'), '"', '\"'),
                quote_literal(corpus), corpus USING ERRCODE = '22023';
        END IF;
        text_config := c.lexical_config;
        SELECT u.t INTO bad FROM unnest(lexical) WITH ORDINALITY AS u(t, i)
        WHERE numnode(phraseto_tsquery(text_config::regconfig, u.t)) = 0 ORDER BY u.i LIMIT 1;
        IF bad IS NOT NULL THEN
            bad := '"' || replace(replace(bad, '\', '\\'), '"', '\"') || '"';
            RAISE EXCEPTION 'match:% has no word that the corpus''s lexical index holds (% drops '
                'stop words and punctuation); use another word or a semantic term %', bad,
                text_config, bad USING ERRCODE = '22023';
        END IF;
    END IF;
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

    -- pglogic.engine.compile: the shared parts: each text's similarity s{i}, then (since 0007)
    -- each lexical term's truth l{j} (pglogic.engine.compile._lexical_truth)
    sim_items := ARRAY(SELECT format(
                           'coalesce(nullif(1 - (%s <=> $1[%s]::vector(%s)), ''NaN''), 0) AS %s',
                           emb, n, c.dim, pglogic._qi('s' || (n - 1)))
                       FROM generate_series(1, n_texts) AS n ORDER BY n);
    sim_names := ARRAY(SELECT 's' || (n - 1) FROM generate_series(1, n_texts) AS n ORDER BY n);
    FOR j IN 1 .. cardinality(lexical) LOOP
        tsq := format('phraseto_tsquery($7::regconfig, $8[%s])', j);
        sim_items := sim_items || format(
            CASE WHEN lexical_truth = 'rank'
                 THEN 'CASE WHEN %1$s @@ %2$s THEN ts_rank_cd(%1$s, %2$s, 32) ELSE 0 END'
                 ELSE 'CASE WHEN %1$s @@ %2$s THEN 1 ELSE 0 END' END || '::float8 AS %3$s',
            tsv, tsq, pglogic._qi('l' || (j - 1)));
        sim_names := sim_names || ('l' || (j - 1));
    END LOOP;
    sims := array_to_string(sim_items, ', ');
    cols := (SELECT string_agg(pglogic._qi(x.col), ', ' ORDER BY x.n)
             FROM unnest(sim_names) WITH ORDINALITY AS x(col, n));
    score := pglogic._score_sql(tree, terms, ops, truth, and_text, lexical);
    final := format(
        'SELECT "d"."id", "d"."external_id", "d"."title", "d"."metadata", top.score, %s' || E'\n'
        || 'FROM (SELECT "id", %s AS score, %s FROM "sims" ORDER BY score DESC, "id" LIMIT $5) top'
        || ' JOIN %s "d" ON "d"."id" = top."id"' || E'\n' || 'ORDER BY top.score DESC, top."id"',
        (SELECT string_agg('top.' || pglogic._qi(x.col), ', ' ORDER BY x.n)
         FROM unnest(sim_names) WITH ORDINALITY AS x(col, n)),
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
        candidate_lexical := '{}';
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

    IF cardinality(candidate_terms) = 0 AND cardinality(candidate_lexical) = 0 THEN
        RAISE EXCEPTION 'The query has no positive term to find candidates with (every term '
            'is negated); set "exact": true to scan every document' USING ERRCODE = '22023';
    END IF;
    IF (NOT filtered AND cardinality(candidate_lexical) = 0) OR cardinality(candidate_terms) = 0
    THEN
        -- (the exact fallback is for filtered scans, and for lexical scans beside semantic
        -- ones; a query whose candidates all come from lexical scans returns its matches only,
        -- fewer than k when few documents match, never a scan of every document)
        exact_statement := NULL;
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
    -- (a scan per positive term and per positive lexical term)
    depth := GREATEST(coalesce(user_depth, pglogic._default_depth(
        k, cardinality(candidate_terms) + cardinality(candidate_lexical))), k);
    guided := use_guide AND n_terms > 1;
    -- a positive lexical term's matches come from its own scan, and the guide knows nothing of
    -- words: no plan that leaves the term scans out
    guide_only := guided AND cardinality(candidate_lexical) = 0 AND n_terms >= 2
        AND coalesce(NOT term_scans, pglogic._guide_suffices(tree));
    union_plan := guided AND cardinality(candidate_lexical) = 0 AND term_scans IS NULL
        AND pglogic._union_suffices(tree, ops[2]);
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
        FOREACH key IN ARRAY candidate_lexical LOOP  -- the lexical index's scans
            j := array_position(lexical, key);
            scans := scans || ARRAY[pglogic._qi('x' || (j - 1)), format('$8[%s]', j), '$3'];
        END LOOP;
    END IF;
    IF guided THEN
        scans := scans || ARRAY['"g"', '$2', '$4'];
        IF given_guide IS NULL THEN
            -- the user's formula alone: its terms and their vectors (pglogic.engine.guide)
            -- (without its lexical terms: pglogic.engine.compile.CompiledQuery.guide_vector)
            guide := pglogic._guide_vector(
                CASE WHEN cardinality(lexical) > 0 THEN pglogic._semantic_part(tree) ELSE tree END,
                terms[1:n_terms], positive, vectors[1:n_terms], ops, truth);
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
        IF scans[3 * i - 2] LIKE '"x%' THEN
            -- a lexical term's matches, best ranked first (the GIN index)
            tsq := format('phraseto_tsquery($7::regconfig, %s)', scans[3 * i - 1]);
            ctes := ctes || format(
                '%s AS MATERIALIZED (SELECT "d"."id", %s FROM %s "d" WHERE %s IS NOT NULL AND %s'
                ' AND %s @@ %s ORDER BY ts_rank_cd(%s, %s, 32) DESC, "d"."id" LIMIT %s)',
                scans[3 * i - 2], sims, tbl, emb, cond, tsv, tsq, tsv, tsq, scans[3 * i]);
            CONTINUE;
        END IF;
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
    similarities jsonb,
    lexical jsonb
)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    p record;
    s record;
    saved jsonb := '{}';
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
    -- SET LOCAL (set_config(..., true)) for the statement, then back to the caller's values
    FOR s IN SELECT x.key, x.value FROM jsonb_each_text(p.settings) AS x LOOP
        saved := saved || jsonb_build_object(s.key, current_setting(s.key, true));
        PERFORM set_config(s.key, s.value, true);
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
        PERFORM set_config(s.key, s.value, true);
    END LOOP;
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
                                        '$6 text[]: the filters'' parameters',
                                        '$7 text: the text search configuration of the '
                                        'lexical index',
                                        '$8 text[]: the lexical terms ($8[j]: lexical term j)'),
        'plan', p.plan,
        'terms', to_jsonb(p.terms),
        'candidate_terms', to_jsonb(p.candidate_terms),
        'lexical', to_jsonb(p.lexical),
        'candidate_lexical', to_jsonb(p.candidate_lexical),
        'lexical_truth', p.lexical_truth,
        'text_config', p.text_config,
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
