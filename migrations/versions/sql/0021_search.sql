-- Revision 0021: the statements of sql/search.sql that are new or changed since the revision before, written
-- by migrations/sqlfiles.py; frozen: never edit it. It runs between the file's DO blocks (applied).

-- the plan ----------------------------------------------------------------------------------

-- Everything pglogic.search runs, decided as pglogic.store.search.search and
-- pglogic.engine.compile.compile_query decide it (fuzzy mode): the filter estimate and the
-- choice of the exact plan (pglogic.engine.plans.prefer_exact), the plan, its depths and hnsw
-- settings, the guide vector, and the statement, text for text the compiler's with its
-- placeholders numbered: $1[i] the i-th term's vector (%(v{i-1})s), $2 the guide vector
-- (%(vg)s), $3 depth, $4 gdepth, $5 k, $6[j] the j-th filter parameter (text), and since
-- migration 0007 $7 the text search configuration of the corpus's lexical index (%(lcfg)s,
-- text) and $8[j] the j-th lexical term (%(q{j-1})s, text). Since migration 0010 passage_table is
-- the passage table the statement searches (null: the documents' own vectors).
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
    OUT text_config text,
    OUT passage_table text
)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    allowed constant text[] := ARRAY['tree', 'operators', 'truth', 'k', 'exact', 'depth',
                                     'ef_search', 'iterative_scan', 'guide', 'term_scans',
                                     'filters', 'and_text', 'vectors', 'lexical', 'mode',
                                     'passages', 'passage_score', 'not_context', 'not_mention'];
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
    lex_items text[] := '{}';
    tsq text;
    use_passages boolean;
    passage_score text;
    factor double precision;
    cap integer;
    pemb text;
    psims text;
    pjoin text;
    and_polarity jsonb := '{}';
    blended boolean[];
    disjunction boolean;  -- (since 0013)
    not_context double precision;  -- (since 0014)
    not_mention double precision;  -- (since 0015)
    floored integer[] := '{}';
    floor_text text;
    contexts jsonb;
    ctx_vectors vector[];
BEGIN
    SELECT co.id, co.table_name, e.model, e.dim, e.column_name,
           (SELECT l.config FROM pglogic.lexical_indexes l WHERE l.corpus_id = co.id)
           AS lexical_config,
           (SELECT pl.tokens FROM pglogic.passage_layouts pl WHERE pl.corpus_id = co.id)
           AS passage_tokens INTO c
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

    -- options (pglogic.engine.options.SearchOptions), the defaults from pglogic.defaults
    opts := pglogic._with_defaults(opts, ARRAY['k', 'exact', 'guide', 'iterative_scan', 'passages',
                                                'operators', 'truth', 'mode', 'lexical', 'and_text',
                                                'passage_score', 'not_context', 'not_mention']);
    k := pglogic._int_option(opts, 'k', NULL);
    IF k < 1 THEN
        RAISE EXCEPTION 'Invalid k=%: must be at least 1', k USING ERRCODE = '22023';
    END IF;
    ops := pglogic._resolve_operators(opts -> 'operators');
    -- pglogic.engine.conjunction: the weight of each AND's own text (fuzzy mode, since 0006)
    IF jsonb_typeof(opts -> 'and_text') = 'boolean' THEN
        RAISE EXCEPTION 'Invalid and_text=%: a whole number from 0 to 10',
            pglogic._show(opts -> 'and_text') USING ERRCODE = '22023';
    END IF;
    and_text := pglogic._int_option(opts, 'and_text', NULL);
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
    lexical_truth := opts ->> 'lexical';
    IF jsonb_typeof(opts -> 'lexical') <> 'string'
       OR NOT lexical_truth = ANY (ARRAY['crisp', 'rank']) THEN
        RAISE EXCEPTION 'Unknown lexical truth %: valid values are crisp, rank',
            CASE WHEN jsonb_typeof(opts -> 'lexical') = 'string' THEN quote_literal(lexical_truth)
                 ELSE pglogic._show(opts -> 'lexical') END USING ERRCODE = '22023';
    END IF;
    mode := opts ->> 'mode';
    exact := pglogic._bool_option(opts, 'exact', NULL);
    -- since migration 0010: a corpus with passages (a row in pglogic.passage_layouts) is
    -- searched through them unless "passages" is false (pglogic.engine.compile.Source.for_corpus)
    use_passages := pglogic._bool_option(opts, 'passages', NULL);  -- (checked on any corpus)
    use_passages := use_passages AND c.passage_tokens IS NOT NULL;
    -- since migration 0011: how the passages make a text's similarity
    -- (pglogic.engine.options.PASSAGE_SCORES; checked on any corpus)
    passage_score := opts ->> 'passage_score';
    IF jsonb_typeof(opts -> 'passage_score') <> 'string'
       OR NOT passage_score = ANY (ARRAY['blend-not-or', 'blend-not', 'max', 'blend']) THEN
        RAISE EXCEPTION 'Unknown passage score %: valid values are blend-not-or, blend-not, max, '
            'blend',
            CASE WHEN jsonb_typeof(opts -> 'passage_score') = 'string'
                 THEN quote_literal(passage_score)
                 ELSE pglogic._show(opts -> 'passage_score') END USING ERRCODE = '22023';
    END IF;
    -- since migration 0014: a negated term against its context (pglogic.engine.negation)
    IF jsonb_typeof(opts -> 'not_context') <> 'number' THEN
        RAISE EXCEPTION 'Invalid not_context=%: a number from 0 (the negated term as it is) to 1 '
            '(without its AND''s positive terms)', pglogic._show(opts -> 'not_context')
            USING ERRCODE = '22023';
    END IF;
    not_context := (opts ->> 'not_context')::double precision;
    IF NOT not_context BETWEEN 0 AND 1 THEN
        RAISE EXCEPTION 'Invalid not_context=%: a number from 0 (the negated term as it is) to 1 '
            '(without its AND''s positive terms)', pglogic._show(opts -> 'not_context')
            USING ERRCODE = '22023';
    END IF;
    -- since migration 0015: a negated term's similarity is at least not_mention where the
    -- document's words match it as a phrase
    IF jsonb_typeof(opts -> 'not_mention') <> 'number' THEN
        RAISE EXCEPTION 'Invalid not_mention=%: a number from 0 (the similarity alone) to 1 (a '
            'mention makes the negated term fully true)', pglogic._show(opts -> 'not_mention')
            USING ERRCODE = '22023';
    END IF;
    not_mention := (opts ->> 'not_mention')::double precision;
    IF NOT not_mention BETWEEN 0 AND 1 THEN
        RAISE EXCEPTION 'Invalid not_mention=%: a number from 0 (the similarity alone) to 1 (a '
            'mention makes the negated term fully true)', pglogic._show(opts -> 'not_mention')
            USING ERRCODE = '22023';
    END IF;
    iterative := pglogic._bool_option(opts, 'iterative_scan', NULL);
    user_depth := pglogic._int_option(opts, 'depth', NULL);
    -- since migration 0017, pglogic.engine.compile._depths' bounds (0 returned no rows); as
    -- there, an exact search has no depth to check
    IF NOT exact AND NOT user_depth BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'Invalid depth=%: from 1 to 100,000 candidates per scan; use "exact": true '
            'to score every document', user_depth USING ERRCODE = '22023';
    END IF;
    ef := pglogic._int_option(opts, 'ef_search', NULL);
    term_scans := pglogic._bool_option(opts, 'term_scans', NULL);
    given_guide := opts -> 'guide';
    IF given_guide IS NULL OR jsonb_typeof(given_guide) IN ('null', 'boolean') THEN
        use_guide := pglogic._bool_option(opts, 'guide', NULL);
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
    IF mode <> 'fuzzy' OR jsonb_typeof(opts -> 'mode') <> 'string' THEN
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
        and_polarity := pglogic._and_text_polarity(tree, true, '{}');  -- (since 0012)
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

    -- since 0015 each negated-only term's similarity is at least not_mention where the
    -- document's words match it as a phrase, on a corpus with a lexical index
    -- (pglogic.engine.compile._floored; the term's text is the scored texts' $9[i])
    IF not_mention > 0 AND c.lexical_config IS NOT NULL THEN
        floored := ARRAY(SELECT n FROM generate_series(1, n_terms) AS n
                         WHERE NOT (collected -> (n - 1) ->> 'positive')::boolean ORDER BY n);
        IF cardinality(floored) > 0 THEN
            text_config := c.lexical_config;
            floor_text := pglogic._float_text(not_mention);
        END IF;
    END IF;
    -- pglogic.engine.compile: the shared parts: each text's similarity s{i}, then (since 0007)
    -- each lexical term's truth l{j} (pglogic.engine.compile._lexical_truth)
    sim_items := ARRAY(SELECT format(
                           CASE WHEN n = ANY (floored)
                                THEN 'GREATEST(coalesce(nullif(1 - (%1$s <=> $1[%2$s]::vector(%3$s)),'
                                     ' ''NaN''), 0), CASE WHEN %5$s @@ phraseto_tsquery($7::regconfig,'
                                     ' $9[%2$s]) THEN %6$s END) AS %4$s'
                                ELSE 'coalesce(nullif(1 - (%1$s <=> $1[%2$s]::vector(%3$s)), ''NaN''),'
                                     ' 0) AS %4$s' END,
                           emb, n, c.dim, pglogic._qi('s' || (n - 1)), tsv, floor_text)
                       FROM generate_series(1, n_texts) AS n ORDER BY n);
    sim_names := ARRAY(SELECT 's' || (n - 1) FROM generate_series(1, n_texts) AS n ORDER BY n);
    FOR j IN 1 .. cardinality(lexical) LOOP
        tsq := format('phraseto_tsquery($7::regconfig, $8[%s])', j);
        lex_items := lex_items || format(
            CASE WHEN lexical_truth = 'rank'
                 THEN 'CASE WHEN %1$s @@ %2$s THEN ts_rank_cd(%1$s, %2$s, 32) ELSE 0 END'
                 ELSE 'CASE WHEN %1$s @@ %2$s THEN 1 ELSE 0 END' END || '::float8 AS %3$s',
            tsv, tsq, pglogic._qi('l' || (j - 1)));
        sim_names := sim_names || ('l' || (j - 1));
    END LOOP;
    sims := array_to_string(sim_items || lex_items, ', ');
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
    IF use_passages THEN
        -- since migration 0010 (pglogic.engine.compile._passage_statement): each similarity is
        -- the best over the document's passages (max, GROUP BY the document), the lexical
        -- truths are the document's own; exact: every (filtered) document with a passage.
        -- Since 0011, "passage_score": "blend" (pglogic.engine.compile._passage_sims): a text
        -- that is not a negated-only term takes the mean of that and the document's own vector's;
        -- since 0012 "blend-not" does so when some term is negated-only (not a candidate term),
        -- and an AND text whose ANDs are all under odd NOTs keeps its best passage (both blends);
        -- since 0013 "blend-not-or" is "blend-not" and, in a formula with neither a
        -- negated-only term nor an AND phrase ("disjunction"), every text takes 0.9 of its best
        -- passage's and 0.1 of the own vector's (pglogic.engine.conjunction.own_weights)
        passage_table := format('%s.%s', pglogic._qi('pglogic'),
                                pglogic._qi(c.table_name || '_passages'));
        pemb := '"p".' || pglogic._qi(c.column_name);
        -- Since 0012 (pglogic.engine.compile._passage_sims) the blended texts' own-vector halves
        -- are added after the GROUP BY, the documents joined again ("b": the grouped rows), so
        -- the grouping never carries the documents' vectors; since 0016 so are the mentions'
        -- floors and the lexical truths (the document's words), so the grouping reads only the
        -- documents' ids (bench/results/not_mention_latency.md). psims is the sims query with a
        -- %s for its FROM ... WHERE.
        disjunction := passage_score = 'blend-not-or' AND terms[1:n_terms] <@ candidate_terms
                       AND cardinality(pglogic._and_texts(tree, '{}')) = 0;
        blended := ARRAY(
            SELECT disjunction
                   OR ((passage_score = 'blend'
                        OR (passage_score IN ('blend-not', 'blend-not-or')
                            AND NOT terms[1:n_terms] <@ candidate_terms))
                       AND (CASE WHEN n > n_terms THEN (and_polarity ->> terms[n])::boolean
                                 ELSE terms[n] = ANY (candidate_terms) END))
            FROM generate_series(1, n_texts) AS n ORDER BY n);
        psims := 'SELECT ' || replace(array_to_string(ARRAY['"d"."id"'] || ARRAY(
            SELECT format('max(coalesce(nullif(1 - (%1$s <=> $1[%2$s]::vector(%3$s)),'
                          ' ''NaN''), 0)) AS %4$s', pemb, n, c.dim, pglogic._qi('s' || (n - 1)))
            FROM generate_series(1, n_texts) AS n ORDER BY n), ', '), '%', '%%')
            || ' FROM %s GROUP BY "d"."id"';
        IF true = ANY (blended) OR cardinality(floored) > 0 OR cardinality(lexical) > 0 THEN
            psims := 'SELECT "b"."id", ' || replace(array_to_string(ARRAY(
                SELECT CASE WHEN n = ANY (floored)  -- (since 0015; never blended: negated)
                            THEN format('GREATEST("b".%1$s, CASE WHEN %2$s @@ phraseto_tsquery('
                                        '$7::regconfig, $9[%3$s]) THEN %4$s END) AS %1$s',
                                        pglogic._qi('s' || (n - 1)), tsv, n, floor_text)
                            WHEN blended[n] AND disjunction
                            THEN format('("b".%1$s * 9 + coalesce(nullif(1 - (%2$s <=> $1[%3$s]::vector(%4$s)),'
                                        ' ''NaN''), 0)) / 10 AS %1$s',
                                        pglogic._qi('s' || (n - 1)), emb, n, c.dim)
                            WHEN blended[n]
                            THEN format('("b".%1$s + coalesce(nullif(1 - (%2$s <=> $1[%3$s]::vector(%4$s)),'
                                        ' ''NaN''), 0)) / 2 AS %1$s',
                                        pglogic._qi('s' || (n - 1)), emb, n, c.dim)
                            ELSE '"b".' || pglogic._qi('s' || (n - 1)) END
                FROM generate_series(1, n_texts) AS n ORDER BY n) || lex_items, ', '), '%', '%%')
                || ' FROM (' || psims || ') "b" JOIN ' || replace(tbl, '%', '%%')
                || ' "d" ON "d"."id" = "b"."id"';
        END IF;
        exact_statement := format(
            'WITH sims AS (%s)' || E'\n' || '%s',
            format(psims, format('%s "d" JOIN %s p ON "p"."doc_id" = "d"."id" WHERE %s IS NOT NULL'
                                 ' AND %s', tbl, passage_table, pemb, cond)),
            final);
    END IF;
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
        IF jsonb_typeof(entry -> 'vector') IN ('array', 'string') THEN
            vec := pglogic._vector(entry -> 'vector', CASE WHEN i <= n_terms THEN 'term '
                                   ELSE 'the AND text ' END || quote_literal(terms[i]));
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
    -- since migration 0014: each negated-only term with a context is scored against its vector
    -- without not_context of the context's span (pglogic.engine.negation.with_context)
    IF not_context > 0 AND NOT single THEN
        contexts := pglogic._not_contexts(tree, '{}');
        FOR key IN SELECT jsonb_object_keys(contexts) LOOP
            i := array_position(terms[1:n_terms], key);
            CONTINUE WHEN i IS NULL OR (collected -> (i - 1) ->> 'positive')::boolean;
            ctx_vectors := ARRAY(SELECT vectors[array_position(terms[1:n_terms], x.e)]
                                 FROM jsonb_array_elements_text(contexts -> key)
                                 WITH ORDINALITY AS x(e, n) ORDER BY x.n);
            vectors[i] := pglogic._projected(vectors[i], ctx_vectors, not_context);
        END LOOP;
    END IF;
    IF exact THEN
        RETURN;
    END IF;

    IF cardinality(candidate_terms) = 0 AND cardinality(candidate_lexical) = 0 THEN
        RAISE EXCEPTION 'The query has no positive term to find candidates with (every term '
            'is negated); set "exact": true to scan every document' USING ERRCODE = '22023';
    END IF;
    IF cardinality(candidate_terms) = 0 THEN
        -- (pglogic.engine.plans.needs_exact_pass: every plan has the exact fallback, run when
        -- its scans found fewer than k rows, but a query whose candidates all come from lexical
        -- scans: it returns its matches only, fewer than k when few documents match, never a
        -- scan of every document)
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
        -- (since migration 0010, over passages: a single-term query's depth, since k passages
        -- may belong to fewer than k documents)
        depth := coalesce(user_depth, CASE WHEN use_passages THEN pglogic._default_depth(k, 1)
                                           ELSE k END);
    END IF;
    -- (a depth of the user's is the guide's too, at least k: pglogic.engine.plans._depths)
    gdepth := CASE WHEN user_depth IS NULL THEN pglogic._guide_depth(k, depth) ELSE depth END;
    IF guide_only AND user_depth IS NULL THEN
        gdepth := pglogic._guide_only_depth(k, CASE WHEN filtered THEN selectivity END);
    END IF;
    scan := CASE WHEN guide_only THEN gdepth WHEN guided THEN GREATEST(depth, gdepth)
                 ELSE depth END;
    -- (pglogic.engine.compile.passage_factor) over passages, a multi-term query's scans go
    -- deeper by the corpus's passages per document, from the planner's statistics of both
    -- tables, in steps of a half from 1 to 8: a document takes several rows of a scan
    IF use_passages AND user_depth IS NULL AND NOT union_plan AND NOT single THEN
        SELECT LEAST(8.0, GREATEST(1.0,
                   ceil((pt.reltuples / dt.reltuples)::double precision * 2 - 0.5) / 2))
        INTO factor FROM pg_class pt, pg_class dt
        WHERE dt.reltuples > 0 AND pt.reltuples > 0
          AND pt.oid = to_regclass('pglogic.' || quote_ident(c.table_name || '_passages'))
          AND dt.oid = to_regclass('pglogic.' || quote_ident(c.table_name));
        IF coalesce(factor, 1.0) > 1 THEN
            cap := CASE WHEN iterative THEN 100000 ELSE 1000 END;
            depth := LEAST(cap, GREATEST(depth, ceil(depth * factor)::integer));
            gdepth := LEAST(cap, GREATEST(gdepth, ceil(gdepth * factor)::integer));
            scan := GREATEST(scan, LEAST(cap, ceil(scan * factor)::integer));
        END IF;
    END IF;
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
    IF single AND use_passages THEN
        -- the term's nearest passages (depth rows: they hold the k best documents, some more
        -- than once), then the statement over passages below
        plan := 'knn';
        scans := ARRAY['"c0"', '$1[1]', '$3'];
        gdepth := NULL;
    ELSIF single THEN
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
    IF single THEN
        NULL;  -- (a single term over passages: its scan is set above)
    ELSIF guide_only THEN
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
            guide := pglogic._vector(given_guide, 'the guide');
            IF vector_dims(guide) <> c.dim THEN
                RAISE EXCEPTION 'The guide vector has % dimensions; corpus % needs % (model %)',
                    vector_dims(guide), quote_literal(corpus), c.dim, quote_literal(c.model)
                    USING ERRCODE = '22023';
            END IF;
        END IF;
    ELSE
        gdepth := NULL;
    END IF;
    IF use_passages THEN
        -- pglogic.engine.compile._passage_scan: each scan finds the documents of its nearest
        -- passages, joining the documents only to filter them; a lexical scan, the documents'
        -- ids; their union "cand", then every similarity over each candidate's passages
        pjoin := CASE WHEN cond <> 'TRUE' THEN format(' JOIN %s "d" ON "d"."id" = "p"."doc_id"', tbl)
                      ELSE '' END;
        FOR i IN 1 .. cardinality(scans) / 3 LOOP
            IF scans[3 * i - 2] LIKE '"x%' THEN
                tsq := format('phraseto_tsquery($7::regconfig, %s)', scans[3 * i - 1]);
                ctes := ctes || format(
                    '%s AS MATERIALIZED (SELECT "d"."id" AS id FROM %s "d" WHERE %s AND %s @@ %s'
                    ' ORDER BY ts_rank_cd(%s, %s, 32) DESC, "d"."id" LIMIT %s)',
                    scans[3 * i - 2], tbl, cond, tsv, tsq, tsv, tsq, scans[3 * i]);
                CONTINUE;
            END IF;
            ctes := ctes || format(
                '%s AS MATERIALIZED (SELECT "p"."doc_id" AS id FROM %s p%s WHERE %s IS NOT NULL'
                ' AND %s ORDER BY %s <=> %s::vector(%s) LIMIT %s)',
                scans[3 * i - 2], passage_table, pjoin, pemb, cond, pemb, scans[3 * i - 1], c.dim,
                scans[3 * i]);
        END LOOP;
        statement := format(
            'WITH %s,' || E'\n' || 'cand AS (%s),' || E'\n' || 'sims AS (%s)' || E'\n' || '%s',
            array_to_string(ctes, E',\n'),
            (SELECT string_agg(format('SELECT id FROM %s', scans[3 * n - 2]), ' UNION ' ORDER BY n)
             FROM generate_series(1, cardinality(scans) / 3) AS n),
            format(psims, format('cand JOIN %s "d" ON "d"."id" = cand.id JOIN %s p'
                                 ' ON "p"."doc_id" = "d"."id" WHERE %s IS NOT NULL AND TRUE',
                                 tbl, passage_table, pemb)),
            final);
        RETURN;
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
