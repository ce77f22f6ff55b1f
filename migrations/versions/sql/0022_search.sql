-- Revision 0022: the statements of sql/search.sql that are new or changed since the revision before, written
-- by migrations/sqlfiles.py; frozen: never edit it. It runs between the file's DO blocks (applied).

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
-- The functions mirror the Python search (pglogic.store.search.search, fuzzy mode) step by
-- step, each step a function named after its Python twin (the plan's section below lists them):
-- pglogic._plan runs them. It plans as pglogic.engine.plans does (the filter estimate and the
-- exact plan where it is cheaper, a k-NN scan for a single term, one MATERIALIZED HNSW CTE per
-- distinct positive term plus the scan along the guide vector, pglogic._guide_vector, or the
-- guide's scan alone, or each term's top k; the same depths and hnsw settings; the exact plan
-- again when the scans return fewer than k rows) and writes the statement of
-- pglogic.engine.statements text for text; pglogic._score_sql writes the fuzzy-logic score
-- (pglogic.engine.operators), pglogic._and_texts each AND's own phrase
-- (pglogic.engine.conjunction), pglogic._not_contexts and pglogic._projected a negated term's
-- vector without its context (pglogic.engine.negation). Over passages (a row in
-- pglogic.passage_layouts) each text's similarity is the best over a document's passages,
-- blended with the document's own vector as "passage_score" says. With the same term and guide
-- vectors it returns the same rows with the same scores as Python (tests/test_sql_functions.py).
--
-- Values are bound as parameters ($1 term vectors, $2 guide vector, $3 depth, $4 gdepth, $5 k,
-- $6 filter parameters, $7 the text search configuration, $8 the lexical terms, $9 the scored
-- texts); identifiers are always quoted (pglogic._qi); operator names are checked against fixed
-- lists before they choose an SQL fragment. Not here: the nsfl and sqo modes, the statement
-- cache and timeouts (set statement_timeout in the transaction). Which revision changed what:
-- migrations/versions/.

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

-- the plan ----------------------------------------------------------------------------------

-- pglogic.search runs the steps of the Python search (pglogic.store.search.search, fuzzy mode),
-- each a function here: the corpus (pglogic._corpus), its options (pglogic._options:
-- pglogic.engine.compile.check_options), the normalised query (pglogic._normalise:
-- pglogic.engine.normalise), the filter's estimate and the exact plan where it is cheaper
-- (pglogic._estimate_filter, pglogic._scan_plan, pglogic._prefer_exact), the statement's shared
-- parts (pglogic._statement_parts: pglogic.engine.statements.statement_parts), the texts'
-- vectors (pglogic._term_vectors, pglogic._with_contexts: pglogic.engine.negation), the plan
-- (pglogic._plan_query: pglogic.engine.plans.plan_query) and one renderer per statement shape
-- (pglogic._exact_statement, _knn_statement, _candidates_statement, _passage_exact_statement,
-- _passage_statement: pglogic.engine.statements). pglogic._plan runs them in that order.

-- pglogic.store.corpus.get_corpus: a corpus's table, its active embedding, its lexical
-- configuration and passage layout (null where it has none).
CREATE OR REPLACE FUNCTION pglogic._corpus(
    corpus text,
    OUT id integer,
    OUT table_name text,
    OUT model text,
    OUT dim integer,
    OUT column_name text,
    OUT lexical_config text,
    OUT passage_tokens integer
)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    existing text;
BEGIN
    SELECT co.id, co.table_name, e.model, e.dim, e.column_name,
           (SELECT l.config FROM pglogic.lexical_indexes l WHERE l.corpus_id = co.id),
           (SELECT pl.tokens FROM pglogic.passage_layouts pl WHERE pl.corpus_id = co.id)
    INTO id, table_name, model, dim, column_name, lexical_config, passage_tokens
    FROM pglogic.corpora co
    JOIN pglogic.embeddings e ON e.corpus_id = co.id AND e.is_active
    WHERE co.name = corpus;
    IF NOT FOUND THEN
        SELECT string_agg(co.name, ', ' ORDER BY co.name) INTO existing FROM pglogic.corpora co;
        RAISE EXCEPTION 'Unknown corpus %', coalesce(quote_literal(corpus), 'null')
            || coalesce('; existing: ' || existing, '; there are no corpora yet')
            USING ERRCODE = '42704';
    END IF;
END
$fn$;

-- pglogic.engine.options.SearchOptions and pglogic.engine.compile.check_options: the query's
-- tree and its options, each checked, the defaults (pglogic.defaults) filled in. opts is the
-- query with the defaults; the others are its values, parsed (ops: the operators AND, OR, NOT;
-- given: the AND texts' vectors; given_guide: a guide vector the caller gave).
CREATE OR REPLACE FUNCTION pglogic._options(
    query jsonb,
    OUT tree jsonb,
    OUT opts jsonb,
    OUT k integer,
    OUT ops text[],
    OUT and_text integer,
    OUT given jsonb,
    OUT truth text,
    OUT lexical_truth text,
    OUT mode text,
    OUT exact boolean,
    OUT use_passages boolean,
    OUT passage_score text,
    OUT not_context double precision,
    OUT not_mention double precision,
    OUT iterative boolean,
    OUT user_depth integer,
    OUT ef integer,
    OUT term_scans boolean,
    OUT use_guide boolean,
    OUT given_guide jsonb
)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    allowed constant text[] := ARRAY['tree', 'operators', 'truth', 'k', 'exact', 'depth',
                                     'ef_search', 'iterative_scan', 'guide', 'term_scans',
                                     'filters', 'and_text', 'vectors', 'lexical', 'mode',
                                     'passages', 'passage_score', 'not_context', 'not_mention'];
    key text;
BEGIN
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

    opts := pglogic._with_defaults(opts, ARRAY['k', 'exact', 'guide', 'iterative_scan', 'passages',
                                                'operators', 'truth', 'mode', 'lexical', 'and_text',
                                                'passage_score', 'not_context', 'not_mention']);
    k := pglogic._int_option(opts, 'k', NULL);
    IF k < 1 THEN
        RAISE EXCEPTION 'Invalid k=%: must be at least 1', k USING ERRCODE = '22023';
    END IF;
    ops := pglogic._resolve_operators(opts -> 'operators');
    -- pglogic.engine.conjunction: the weight of each AND's own text
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
    truth := pglogic._resolve_truth(opts -> 'truth');  -- ('calibrated': the corpus's, in _plan)
    -- a lexical term's truth (pglogic.engine.options.LEXICAL)
    lexical_truth := opts ->> 'lexical';
    IF jsonb_typeof(opts -> 'lexical') <> 'string'
       OR NOT lexical_truth = ANY (ARRAY['crisp', 'rank']) THEN
        RAISE EXCEPTION 'Unknown lexical truth %: valid values are crisp, rank',
            CASE WHEN jsonb_typeof(opts -> 'lexical') = 'string' THEN quote_literal(lexical_truth)
                 ELSE pglogic._show(opts -> 'lexical') END USING ERRCODE = '22023';
    END IF;
    mode := opts ->> 'mode';  -- (checked by pglogic._normalise: the message names lexical terms)
    exact := pglogic._bool_option(opts, 'exact', NULL);
    -- a corpus with passages is searched through them unless "passages" is false (checked on
    -- any corpus; pglogic._plan ignores it on a corpus without passages)
    use_passages := pglogic._bool_option(opts, 'passages', NULL);
    -- how the passages make a text's similarity (pglogic.engine.options.PASSAGE_SCORES; checked
    -- on any corpus)
    passage_score := opts ->> 'passage_score';
    IF jsonb_typeof(opts -> 'passage_score') <> 'string'
       OR NOT passage_score = ANY (ARRAY['blend-not-or', 'blend-not', 'max', 'blend']) THEN
        RAISE EXCEPTION 'Unknown passage score %: valid values are blend-not-or, blend-not, max, '
            'blend',
            CASE WHEN jsonb_typeof(opts -> 'passage_score') = 'string'
                 THEN quote_literal(passage_score)
                 ELSE pglogic._show(opts -> 'passage_score') END USING ERRCODE = '22023';
    END IF;
    -- a negated term against its context (pglogic.engine.negation)
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
    -- a negated term's similarity is at least not_mention where the document's words match it
    -- as a phrase
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
    -- pglogic.engine.plans' bounds; an exact search has no depth to check
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
END
$fn$;

-- pglogic.engine.normalise.normalise (fuzzy mode): the query's terms (collected: each term's
-- entry, with its polarity and vector), the scored texts (the terms, then the AND phrases when
-- and_text > 0), the terms that find candidates, the lexical terms and those that find
-- candidates, whether the query is one term, the effective AND text weight, the text search
-- configuration the statement needs, the negated-only terms a mention floors (mentions: their
-- numbers among the texts, from 1) and, over passages, each text's weight of the document's own
-- vector (own: pglogic.engine.conjunction.own_weights, 0 for the best passage alone).
CREATE OR REPLACE FUNCTION pglogic._normalise(
    tree jsonb,
    opts jsonb,
    and_text integer,
    not_mention double precision,
    passage_score text,
    passages boolean,
    corpus text,
    lexical_config text,
    OUT collected jsonb,
    OUT terms text[],
    OUT candidate_terms text[],
    OUT lexical text[],
    OUT candidate_lexical text[],
    OUT n_terms integer,
    OUT single boolean,
    OUT and_weight integer,
    OUT and_polarity jsonb,
    OUT text_config text,
    OUT mentions integer[],
    OUT own double precision[]
)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    mode text := opts ->> 'mode';
    bad text;
    disjunction boolean;
BEGIN
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
        IF cardinality(lexical) > 0 THEN
            RAISE EXCEPTION 'Lexical terms (match:...) are scored in the fuzzy mode only, not in '
                'mode %', mode USING ERRCODE = '22023';
        END IF;
        RAISE EXCEPTION 'pglogic.search (SQL) has the fuzzy mode only, not %', mode
            USING ERRCODE = '22023';
    END IF;
    IF cardinality(lexical) > 0 THEN
        -- the corpus's lexical index (pglogic.store.lexical), and a searchable word in each term
        -- (pglogic.store.search.check_lexical_terms)
        IF lexical_config IS NULL THEN
            RAISE EXCEPTION 'match:"%" needs a lexical index, and corpus % has none: add it with '
                '`pglogic corpus lexical %`', replace(replace(lexical[1], '\', '\\'), '"', '\"'),
                quote_literal(corpus), corpus USING ERRCODE = '22023';
        END IF;
        text_config := lexical_config;
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
    and_weight := CASE WHEN single THEN 0 ELSE and_text END;
    and_polarity := '{}';
    IF and_weight > 0 THEN  -- the scored texts: the terms, then the AND phrases
        terms := pglogic._and_texts(tree, terms);
        and_polarity := pglogic._and_text_polarity(tree, true, '{}');
    END IF;
    -- each negated-only term's similarity is at least not_mention where the document's words
    -- match it as a phrase, on a corpus with a lexical index (the term's text is $9[i])
    mentions := '{}';
    IF not_mention > 0 AND lexical_config IS NOT NULL THEN
        mentions := ARRAY(SELECT n FROM generate_series(1, n_terms) AS n
                          WHERE NOT (collected -> (n - 1) ->> 'positive')::boolean ORDER BY n);
        IF cardinality(mentions) > 0 THEN
            text_config := lexical_config;
        END IF;
    END IF;
    own := '{}';
    IF passages THEN
        -- "blend" (since 0011): a text that is not a negated-only term takes the mean of its
        -- best passage's similarity and the document's own vector's; "blend-not" does so when
        -- some term is negated-only, and an AND text whose ANDs are all under odd NOTs keeps its
        -- best passage (both blends); "blend-not-or" is "blend-not" and, in a formula with
        -- neither a negated-only term nor an AND phrase, every text takes 0.9 of its best
        -- passage's and 0.1 of the own vector's
        disjunction := passage_score = 'blend-not-or' AND terms[1:n_terms] <@ candidate_terms
                       AND cardinality(pglogic._and_texts(tree, '{}')) = 0;
        own := ARRAY(
            SELECT CASE WHEN NOT (disjunction
                       OR ((passage_score = 'blend'
                            OR (passage_score IN ('blend-not', 'blend-not-or')
                                AND NOT terms[1:n_terms] <@ candidate_terms))
                           AND (CASE WHEN n > n_terms THEN (and_polarity ->> terms[n])::boolean
                                     ELSE terms[n] = ANY (candidate_terms) END)))
                        THEN 0.0 WHEN disjunction THEN 0.1 ELSE 0.5 END
            FROM generate_series(1, cardinality(terms)) AS n ORDER BY n);
    END IF;
END
$fn$;

-- pglogic.store.search.estimate_filter: the fraction of the rows that pass the filter (a
-- 1,000-page sample, pglogic.engine.plans.sample_percent and estimate_from_sample) and how many
-- rows that makes.
CREATE OR REPLACE FUNCTION pglogic._estimate_filter(
    tbl text, filters jsonb, filter_values text[],
    OUT selectivity double precision, OUT matching_rows double precision
)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    pages bigint;
    rows_est double precision;
    est_cond text;
    est record;
BEGIN
    SELECT GREATEST(1, cl.relpages), GREATEST(0.0, cl.reltuples::text::double precision)
    INTO pages, rows_est FROM pg_class cl WHERE cl.oid = (tbl)::regclass;
    SELECT f.condition INTO est_cond FROM pglogic._filters_sql(filters, '"d"."metadata"', 2) AS f;
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
END
$fn$;

-- pglogic.engine.plans.scan_plan: the index plan a query would take ('union', 'guide' or
-- 'terms'), to weigh against the exact plan (pglogic._prefer_exact).
CREATE OR REPLACE FUNCTION pglogic._scan_plan(
    tree jsonb, n_terms integer, single boolean, use_guide boolean, term_scans boolean,
    or_operator text
)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN single THEN 'union'
            WHEN use_guide AND n_terms >= 2
                 AND coalesce(NOT term_scans, pglogic._guide_suffices(tree)) THEN 'guide'
            WHEN use_guide AND term_scans IS NULL
                 AND pglogic._union_suffices(tree, or_operator) THEN 'union'
            ELSE 'terms' END;

-- pglogic.engine.source.passage_factor: how many times deeper the passages' scans of a
-- multi-term query go, from the planner's statistics of both tables (1 when unknown).
CREATE OR REPLACE FUNCTION pglogic._passage_factor(table_name text)
RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE
RETURN coalesce((SELECT LEAST(8.0, GREATEST(1.0,
                            ceil((pt.reltuples / dt.reltuples)::double precision * 2 - 0.5) / 2))
                 FROM pg_class pt, pg_class dt
                 WHERE dt.reltuples > 0 AND pt.reltuples > 0
                   AND pt.oid = to_regclass('pglogic.' || quote_ident(table_name || '_passages'))
                   AND dt.oid = to_regclass('pglogic.' || quote_ident(table_name))), 1.0);

-- The scored texts' vectors: a term's from the tree, an AND phrase's from "vectors", either
-- from pglogic.term_cache for the corpus's model when not given; each of the corpus's
-- dimensions.
CREATE OR REPLACE FUNCTION pglogic._term_vectors(
    corpus text, model text, dim integer, terms text[], n_terms integer, collected jsonb,
    given jsonb
)
RETURNS vector[]
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    vectors vector[] := '{}';
    entry jsonb;
    vec vector;
BEGIN
    FOR i IN 1 .. cardinality(terms) LOOP
        entry := CASE WHEN i <= n_terms THEN collected -> (i - 1)
                      ELSE jsonb_build_object('vector', given -> terms[i]) END;
        IF jsonb_typeof(entry -> 'vector') IN ('array', 'string') THEN
            vec := pglogic._vector(entry -> 'vector', CASE WHEN i <= n_terms THEN 'term '
                                   ELSE 'the AND text ' END || quote_literal(terms[i]));
        ELSE
            SELECT tc.embedding INTO vec FROM pglogic.term_cache tc
            WHERE tc.model = _term_vectors.model AND tc.term = terms[i];
            IF NOT FOUND AND i > n_terms THEN
                RAISE EXCEPTION 'The AND text % has no vector: give it in "vectors" (render.'
                    'search_json does), cache it in pglogic.term_cache for model %, or set '
                    '"and_text": 0', quote_literal(terms[i]), quote_literal(model)
                    USING ERRCODE = '22023';
            END IF;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'Term % has no vector and is not in pglogic.term_cache for model %',
                    quote_literal(terms[i]), quote_literal(model) USING ERRCODE = '22023';
            END IF;
        END IF;
        IF vector_dims(vec) <> dim THEN
            RAISE EXCEPTION 'The vector of term % has % dimensions; corpus % needs % (model %)',
                quote_literal(terms[i]), vector_dims(vec), quote_literal(corpus), dim,
                quote_literal(model) USING ERRCODE = '22023';
        END IF;
        vectors := array_append(vectors, vec);
    END LOOP;
    RETURN vectors;
END
$fn$;

-- pglogic.engine.negation.with_context: each negated-only term with a context is scored against
-- its vector without not_context of the context's span.
CREATE OR REPLACE FUNCTION pglogic._with_contexts(
    tree jsonb, terms text[], n_terms integer, collected jsonb, vectors vector[],
    not_context double precision
)
RETURNS vector[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    contexts jsonb := pglogic._not_contexts(tree, '{}');
    key text;
    i integer;
    ctx_vectors vector[];
BEGIN
    FOR key IN SELECT jsonb_object_keys(contexts) LOOP
        i := array_position(terms[1:n_terms], key);
        CONTINUE WHEN i IS NULL OR (collected -> (i - 1) ->> 'positive')::boolean;
        ctx_vectors := ARRAY(SELECT vectors[array_position(terms[1:n_terms], x.e)]
                             FROM jsonb_array_elements_text(contexts -> key)
                             WITH ORDINALITY AS x(e, n) ORDER BY x.n);
        vectors[i] := pglogic._projected(vectors[i], ctx_vectors, not_context);
    END LOOP;
    RETURN vectors;
END
$fn$;

-- pglogic.engine.plans.plan_query (not exact): the plan ('knn', 'guide', 'union' or 'terms'),
-- its candidate scans (a triple each: the CTE's name, the placeholder it scans along, that of
-- its LIMIT), the depths bound to $3 and $4, the session settings; scan is the deepest scan,
-- guided whether the guide scans too. iterative: the option and the server's pgvector; factor:
-- the passages per document (pglogic._passage_factor; 1 without passages).
CREATE OR REPLACE FUNCTION pglogic._plan_query(
    tree jsonb,
    terms text[],
    candidate_terms text[],
    lexical text[],
    candidate_lexical text[],
    n_terms integer,
    single boolean,
    k integer,
    user_depth integer,
    ef integer,
    iterative boolean,
    use_guide boolean,
    term_scans boolean,
    or_operator text,
    passages boolean,
    factor double precision,
    filtered boolean,
    selectivity double precision,
    OUT plan text,
    OUT scans text[],
    OUT depth integer,
    OUT gdepth integer,
    OUT scan integer,
    OUT guided boolean,
    OUT settings jsonb
)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    guide_only boolean;
    union_plan boolean;
    want integer;
    cap integer;
    key text;
    j integer;
BEGIN
    IF cardinality(candidate_terms) = 0 AND cardinality(candidate_lexical) = 0 THEN
        RAISE EXCEPTION 'The query has no positive term to find candidates with (every term '
            'is negated); set "exact": true to scan every document' USING ERRCODE = '22023';
    END IF;
    -- the plan's scans and depths (pglogic.engine.plans._depths)
    IF k > 1000 THEN
        RAISE EXCEPTION 'k=% is above 1000, the most an HNSW scan returns; set "exact": true',
            k USING ERRCODE = '22023';
    END IF;
    -- (a scan per positive term and per positive lexical term)
    depth := GREATEST(coalesce(user_depth, pglogic._default_depth(
        k, cardinality(candidate_terms) + cardinality(candidate_lexical))), k);
    guided := use_guide AND n_terms > 1;
    -- a positive lexical term's matches come from its own scan, and the guide knows nothing of
    -- words: no plan that leaves the term scans out
    guide_only := guided AND cardinality(candidate_lexical) = 0 AND n_terms >= 2
        AND coalesce(NOT term_scans, pglogic._guide_suffices(tree));
    union_plan := guided AND cardinality(candidate_lexical) = 0 AND term_scans IS NULL
        AND pglogic._union_suffices(tree, or_operator);
    IF union_plan THEN  -- each term's top k, at a single-term query's ef_search; no guide
        guided := false;
        -- (over passages: a single-term query's depth, since k passages may belong to fewer
        -- than k documents)
        depth := coalesce(user_depth, CASE WHEN passages THEN pglogic._default_depth(k, 1)
                                           ELSE k END);
    END IF;
    -- (a depth of the user's is the guide's too, at least k)
    gdepth := CASE WHEN user_depth IS NULL THEN pglogic._guide_depth(k, depth) ELSE depth END;
    IF guide_only AND user_depth IS NULL THEN
        gdepth := pglogic._guide_only_depth(k, CASE WHEN filtered THEN selectivity END);
    END IF;
    scan := CASE WHEN guide_only THEN gdepth WHEN guided THEN GREATEST(depth, gdepth)
                 ELSE depth END;
    -- over passages, a multi-term query's scans go deeper by the corpus's passages per
    -- document: a document takes several rows of a scan
    IF passages AND user_depth IS NULL AND NOT union_plan AND NOT single AND factor > 1 THEN
        cap := CASE WHEN iterative THEN 100000 ELSE 1000 END;
        depth := LEAST(cap, GREATEST(depth, ceil(depth * factor)::integer));
        gdepth := LEAST(cap, GREATEST(gdepth, ceil(gdepth * factor)::integer));
        scan := GREATEST(scan, LEAST(cap, ceil(scan * factor)::integer));
    END IF;
    IF scan > 1000 AND NOT iterative THEN
        RAISE EXCEPTION 'depth=% is above 1000 without iterative scans', depth
            USING ERRCODE = '22023';
    END IF;

    -- the session settings (pglogic.engine.plans._session_settings): hnsw.ef_search and
    -- hnsw.iterative_scan; never a generic plan for a prepared copy of the statement
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
    settings := jsonb_build_object('plan_cache_mode', 'force_custom_plan', 'hnsw.ef_search',
                                   ef::text);
    IF iterative AND (filtered OR scan > ef) THEN
        settings := settings || jsonb_build_object('hnsw.iterative_scan', 'relaxed_order');
    END IF;

    -- the scans: the single term's (over passages: its nearest passages, depth rows: they hold
    -- the k best documents, some more than once; over documents, the k-NN statement needs
    -- none), the guide's alone, or each positive term's and lexical term's, then the guide's
    scans := '{}';
    IF single THEN
        plan := 'knn';
        IF passages THEN
            scans := ARRAY['"c0"', '$1[1]', '$3'];
        ELSE
            depth := NULL;
        END IF;
        gdepth := NULL;
        guided := false;
        RETURN;
    ELSIF guide_only THEN
        plan := 'guide';
        depth := NULL;
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
    ELSE
        gdepth := NULL;
    END IF;
END
$fn$;

-- pglogic.engine.statements.statement_parts: what every statement shape shares, as a JSON
-- object of SQL texts: the tables and vector columns (tbl, emb; over passages ptbl, pemb), the
-- filter condition (cond), each text's similarity s{i} and each lexical term's truth l{j}
-- (sims; their names, cols), the final ranking (final) and, over passages, the similarities
-- from a document's passages (psims, with a %s for its FROM ... WHERE: pglogic._passage_sims).
CREATE OR REPLACE FUNCTION pglogic._statement_parts(
    table_name text,
    column_name text,
    dim integer,
    cond text,
    tree jsonb,
    terms text[],
    lexical text[],
    lexical_truth text,
    ops text[],
    truth text,
    and_weight integer,
    mentions integer[],
    not_mention double precision,
    passages boolean,
    own double precision[]
)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    tsv constant text := '"d"."tsv"';  -- pglogic.engine.compile.LEXICAL_COLUMN
    tbl text := format('%s.%s', pglogic._qi('pglogic'), pglogic._qi(table_name));
    emb text := '"d".' || pglogic._qi(column_name);
    floor_text text := CASE WHEN cardinality(mentions) > 0 THEN pglogic._float_text(not_mention) END;
    n_texts integer := cardinality(terms);
    sim_items text[];
    sim_names text[];
    lex_items text[] := '{}';
    tsq text;
    cols text;
    final text;
    parts jsonb;
BEGIN
    -- each text's similarity s{i}, then each lexical term's truth l{j}
    sim_items := ARRAY(SELECT format(
                           CASE WHEN n = ANY (mentions)
                                THEN 'GREATEST(coalesce(nullif(1 - (%1$s <=> $1[%2$s]::vector(%3$s)),'
                                     ' ''NaN''), 0), CASE WHEN %5$s @@ phraseto_tsquery($7::regconfig,'
                                     ' $9[%2$s]) THEN %6$s END) AS %4$s'
                                ELSE 'coalesce(nullif(1 - (%1$s <=> $1[%2$s]::vector(%3$s)), ''NaN''),'
                                     ' 0) AS %4$s' END,
                           emb, n, dim, pglogic._qi('s' || (n - 1)), tsv, floor_text)
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
    cols := (SELECT string_agg(pglogic._qi(x.col), ', ' ORDER BY x.n)
             FROM unnest(sim_names) WITH ORDINALITY AS x(col, n));
    final := format(
        'SELECT "d"."id", "d"."external_id", "d"."title", "d"."metadata", top.score, %s' || E'\n'
        || 'FROM (SELECT "id", %s AS score, %s FROM "sims" ORDER BY score DESC, "id" LIMIT $5) top'
        || ' JOIN %s "d" ON "d"."id" = top."id"' || E'\n' || 'ORDER BY top.score DESC, top."id"',
        (SELECT string_agg('top.' || pglogic._qi(x.col), ', ' ORDER BY x.n)
         FROM unnest(sim_names) WITH ORDINALITY AS x(col, n)),
        pglogic._score_sql(tree, terms, ops, truth, and_weight, lexical), cols, tbl);
    parts := jsonb_build_object('tbl', tbl, 'emb', emb, 'dim', dim, 'cond', cond, 'tsv', tsv,
                                'sims', array_to_string(sim_items || lex_items, ', '),
                                'cols', cols, 'final', final);
    IF passages THEN
        parts := parts || jsonb_build_object(
            'ptbl', format('%s.%s', pglogic._qi('pglogic'), pglogic._qi(table_name || '_passages')),
            'pemb', '"p".' || pglogic._qi(column_name));
        parts := parts || jsonb_build_object(
            'psims', pglogic._passage_sims(parts, n_texts, mentions, floor_text, own, lex_items));
    END IF;
    RETURN parts;
END
$fn$;

-- pglogic.engine.statements._passage_sims: each text's similarity as the best over the
-- document's passages (max, GROUP BY the document); the texts that take part of the own vector
-- (own[i] 0.5: the mean; 0.1: a tenth), the mentions' floors and the lexical truths (the
-- document's words) are added after the GROUP BY, the documents joined again ("b": the grouped
-- rows), so the grouping reads only the documents' ids. A %s stands for its FROM ... WHERE.
CREATE OR REPLACE FUNCTION pglogic._passage_sims(
    parts jsonb, n_texts integer, mentions integer[], floor_text text,
    own double precision[], lex_items text[]
)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    psims text;
BEGIN
    psims := 'SELECT ' || replace(array_to_string(ARRAY['"d"."id"'] || ARRAY(
        SELECT format('max(coalesce(nullif(1 - (%1$s <=> $1[%2$s]::vector(%3$s)),'
                      ' ''NaN''), 0)) AS %4$s', parts ->> 'pemb', n, parts ->> 'dim',
                      pglogic._qi('s' || (n - 1)))
        FROM generate_series(1, n_texts) AS n ORDER BY n), ', '), '%', '%%')
        || ' FROM %s GROUP BY "d"."id"';
    IF 0.0 < ANY (own) OR cardinality(mentions) > 0 OR cardinality(lex_items) > 0 THEN
        psims := 'SELECT "b"."id", ' || replace(array_to_string(ARRAY(
            SELECT CASE WHEN n = ANY (mentions)  -- (never blended: negated)
                        THEN format('GREATEST("b".%1$s, CASE WHEN %2$s @@ phraseto_tsquery('
                                    '$7::regconfig, $9[%3$s]) THEN %4$s END) AS %1$s',
                                    pglogic._qi('s' || (n - 1)), parts ->> 'tsv', n, floor_text)
                        WHEN own[n] = 0.1
                        THEN format('("b".%1$s * 9 + coalesce(nullif(1 - (%2$s <=> $1[%3$s]::vector(%4$s)),'
                                    ' ''NaN''), 0)) / 10 AS %1$s',
                                    pglogic._qi('s' || (n - 1)), parts ->> 'emb', n, parts ->> 'dim')
                        WHEN own[n] = 0.5
                        THEN format('("b".%1$s + coalesce(nullif(1 - (%2$s <=> $1[%3$s]::vector(%4$s)),'
                                    ' ''NaN''), 0)) / 2 AS %1$s',
                                    pglogic._qi('s' || (n - 1)), parts ->> 'emb', n, parts ->> 'dim')
                        ELSE '"b".' || pglogic._qi('s' || (n - 1)) END
            FROM generate_series(1, n_texts) AS n ORDER BY n) || lex_items, ', '), '%', '%%')
            || ' FROM (' || psims || ') "b" JOIN ' || replace(parts ->> 'tbl', '%', '%%')
            || ' "d" ON "d"."id" = "b"."id"';
    END IF;
    RETURN psims;
END
$fn$;

-- pglogic.engine.statements.exact_statement: every (filtered) document scored.
CREATE OR REPLACE FUNCTION pglogic._exact_statement(parts jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN format('WITH sims AS (SELECT "d"."id", %s FROM %s "d" WHERE %s IS NOT NULL AND %s)'
              || E'\n' || '%s', parts ->> 'sims', parts ->> 'tbl', parts ->> 'emb',
              parts ->> 'cond', parts ->> 'final');

-- pglogic.engine.statements.passage_exact_statement: every (filtered) document with a passage.
CREATE OR REPLACE FUNCTION pglogic._passage_exact_statement(parts jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN format('WITH sims AS (%s)' || E'\n' || '%s',
              format(parts ->> 'psims',
                     format('%s "d" JOIN %s p ON "p"."doc_id" = "d"."id" WHERE %s IS NOT NULL'
                            ' AND %s', parts ->> 'tbl', parts ->> 'ptbl', parts ->> 'pemb',
                            parts ->> 'cond')),
              parts ->> 'final');

-- pglogic.engine.statements.knn_statement: a single term's k-NN scan.
CREATE OR REPLACE FUNCTION pglogic._knn_statement(parts jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN format('WITH sims AS MATERIALIZED (SELECT "d"."id", %s FROM %s "d" WHERE %s IS NOT NULL'
              ' AND %s ORDER BY %s <=> $1[1]::vector(%s) LIMIT $5)' || E'\n' || '%s',
              parts ->> 'sims', parts ->> 'tbl', parts ->> 'emb', parts ->> 'cond',
              parts ->> 'emb', parts ->> 'dim', parts ->> 'final');

-- pglogic.engine.statements.candidates_statement: one MATERIALIZED CTE per scan (an HNSW scan
-- along a vector, or a lexical term's matches, best ranked first, by the GIN index), their
-- union, the ranking.
CREATE OR REPLACE FUNCTION pglogic._candidates_statement(parts jsonb, scans text[])
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    tsv text := parts ->> 'tsv';
    ctes text[] := '{}';
    tsq text;
BEGIN
    FOR i IN 1 .. cardinality(scans) / 3 LOOP
        IF scans[3 * i - 2] LIKE '"x%' THEN
            tsq := format('phraseto_tsquery($7::regconfig, %s)', scans[3 * i - 1]);
            ctes := ctes || format(
                '%s AS MATERIALIZED (SELECT "d"."id", %s FROM %s "d" WHERE %s IS NOT NULL AND %s'
                ' AND %s @@ %s ORDER BY ts_rank_cd(%s, %s, 32) DESC, "d"."id" LIMIT %s)',
                scans[3 * i - 2], parts ->> 'sims', parts ->> 'tbl', parts ->> 'emb',
                parts ->> 'cond', tsv, tsq, tsv, tsq, scans[3 * i]);
            CONTINUE;
        END IF;
        ctes := ctes || format(
            '%s AS MATERIALIZED (SELECT "d"."id", %s FROM %s "d" WHERE %s IS NOT NULL AND %s'
            ' ORDER BY %s <=> %s::vector(%s) LIMIT %s)',
            scans[3 * i - 2], parts ->> 'sims', parts ->> 'tbl', parts ->> 'emb',
            parts ->> 'cond', parts ->> 'emb', scans[3 * i - 1], parts ->> 'dim', scans[3 * i]);
    END LOOP;
    RETURN format(
        'WITH %s,' || E'\n' || 'sims AS (%s)' || E'\n' || '%s',
        array_to_string(ctes, E',\n'),
        (SELECT string_agg(format('SELECT "id", %s FROM %s', parts ->> 'cols', scans[3 * n - 2]),
                           ' UNION ' ORDER BY n)
         FROM generate_series(1, cardinality(scans) / 3) AS n),
        parts ->> 'final');
END
$fn$;

-- pglogic.engine.statements.passage_statement: each scan finds the documents of its nearest
-- passages, joining the documents only to filter them (a lexical scan: the documents' ids);
-- their union "cand", then every similarity over each candidate's passages.
CREATE OR REPLACE FUNCTION pglogic._passage_statement(parts jsonb, scans text[])
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    tsv text := parts ->> 'tsv';
    tbl text := parts ->> 'tbl';
    cond text := parts ->> 'cond';
    pjoin text := CASE WHEN parts ->> 'cond' <> 'TRUE'
                       THEN format(' JOIN %s "d" ON "d"."id" = "p"."doc_id"', parts ->> 'tbl')
                       ELSE '' END;
    ctes text[] := '{}';
    tsq text;
BEGIN
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
            scans[3 * i - 2], parts ->> 'ptbl', pjoin, parts ->> 'pemb', cond, parts ->> 'pemb',
            scans[3 * i - 1], parts ->> 'dim', scans[3 * i]);
    END LOOP;
    RETURN format(
        'WITH %s,' || E'\n' || 'cand AS (%s),' || E'\n' || 'sims AS (%s)' || E'\n' || '%s',
        array_to_string(ctes, E',\n'),
        (SELECT string_agg(format('SELECT id FROM %s', scans[3 * n - 2]), ' UNION ' ORDER BY n)
         FROM generate_series(1, cardinality(scans) / 3) AS n),
        format(parts ->> 'psims', format('cand JOIN %s "d" ON "d"."id" = cand.id JOIN %s p'
                                         ' ON "p"."doc_id" = "d"."id" WHERE %s IS NOT NULL AND TRUE',
                                         tbl, parts ->> 'ptbl', parts ->> 'pemb')),
        parts ->> 'final');
END
$fn$;

-- Everything pglogic.search runs, decided as pglogic.store.search.search decides it (fuzzy
-- mode), the steps above in order: the statement, text for text the compiler's with its
-- placeholders numbered: $1[i] the i-th text's vector (%(v{i-1})s), $2 the guide vector
-- (%(vg)s), $3 depth, $4 gdepth, $5 k, $6[j] the j-th filter parameter (text), $7 the text search
-- configuration of the corpus's lexical index (%(lcfg)s), $8[j] the j-th lexical term
-- (%(q{j-1})s, text) and $9[i] the i-th scored text; exact_statement, the exact plan to run when
-- the index plan finds fewer than k rows (pglogic.engine.plans.needs_exact_pass); passage_table,
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
    c record;
    o record;
    n record;
    p record;
    cal record;
    cond text;
    filtered boolean;
    exact boolean;
    use_passages boolean;
    tbl text;
    parts jsonb;
    server_iterative boolean;
BEGIN
    SELECT * INTO c FROM pglogic._corpus(corpus);
    SELECT * INTO o FROM pglogic._options(query);
    k := o.k;
    operators := format('and=%s,or=%s,not=%s', o.ops[1], o.ops[2], o.ops[3]);
    truth := o.truth;
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
    lexical_truth := o.lexical_truth;
    exact := o.exact;
    use_passages := o.use_passages AND c.passage_tokens IS NOT NULL;
    SELECT * INTO n FROM pglogic._normalise(o.tree, o.opts, o.and_text, o.not_mention,
                                            o.passage_score, use_passages, corpus,
                                            c.lexical_config);
    terms := n.terms;
    candidate_terms := n.candidate_terms;
    lexical := n.lexical;
    candidate_lexical := n.candidate_lexical;
    text_config := n.text_config;

    SELECT f.condition, f.params INTO cond, filter_values
    FROM pglogic._filters_sql(o.opts -> 'filters', '"d"."metadata"', 6) AS f;
    filtered := cardinality(filter_values) > 0;
    tbl := format('%s.%s', pglogic._qi('pglogic'), pglogic._qi(c.table_name));
    -- a filter's estimate, and the exact plan where it is cheaper (plans.prefer_exact)
    IF filtered AND NOT exact THEN
        SELECT * INTO selectivity, matching_rows
        FROM pglogic._estimate_filter(tbl, o.opts -> 'filters', filter_values);
        IF cardinality(candidate_terms) > 0 AND o.user_depth IS NULL AND pglogic._prefer_exact(
            matching_rows, k, cardinality(candidate_terms),
            pglogic._scan_plan(o.tree, n.n_terms, n.single, o.use_guide, o.term_scans, o.ops[2]),
            selectivity) THEN
            exact := true;  -- so few rows pass: scoring them all is cheaper
        END IF;
    END IF;

    parts := pglogic._statement_parts(c.table_name, c.column_name, c.dim, cond, o.tree, terms,
                                      lexical, lexical_truth, o.ops, truth, n.and_weight,
                                      n.mentions, o.not_mention, use_passages, n.own);
    IF use_passages THEN
        passage_table := parts ->> 'ptbl';
        exact_statement := pglogic._passage_exact_statement(parts);
    ELSE
        exact_statement := pglogic._exact_statement(parts);
    END IF;
    vectors := pglogic._term_vectors(corpus, c.model, c.dim, terms, n.n_terms, n.collected,
                                     o.given);
    IF o.not_context > 0 AND NOT n.single THEN
        vectors := pglogic._with_contexts(o.tree, terms, n.n_terms, n.collected, vectors,
                                          o.not_context);
    END IF;
    IF exact THEN
        plan := 'exact';
        statement := exact_statement;
        exact_statement := NULL;
        candidate_terms := '{}';
        candidate_lexical := '{}';
        settings := '{"plan_cache_mode": "force_custom_plan"}';
        RETURN;
    END IF;

    SELECT coalesce((regexp_match(x.extversion, '^(\d+)\.(\d+)'))::integer[]
                    >= ARRAY[0, 8], false)
    INTO server_iterative FROM pg_extension x WHERE x.extname = 'vector';
    SELECT * INTO p FROM pglogic._plan_query(
        o.tree, terms, candidate_terms, lexical, candidate_lexical, n.n_terms, n.single, k,
        o.user_depth, o.ef, coalesce(server_iterative, false) AND o.iterative, o.use_guide,
        o.term_scans, o.ops[2], use_passages,
        CASE WHEN use_passages THEN pglogic._passage_factor(c.table_name) ELSE 1.0 END,
        filtered, selectivity);
    plan := p.plan;
    depth := p.depth;
    gdepth := p.gdepth;
    settings := p.settings;
    IF cardinality(candidate_terms) = 0 THEN
        -- (pglogic.engine.plans.needs_exact_pass: every plan has the exact fallback, run when
        -- its scans found fewer than k rows, but a query whose candidates all come from lexical
        -- scans: it returns its matches only, fewer than k when few documents match, never a
        -- scan of every document)
        exact_statement := NULL;
    END IF;
    IF p.guided THEN
        IF o.given_guide IS NULL THEN
            -- the user's formula alone: its terms and their vectors (pglogic.engine.guide)
            -- (without its lexical terms: pglogic.engine.compile.CompiledQuery.guide_vector)
            guide := pglogic._guide_vector(
                CASE WHEN cardinality(lexical) > 0 THEN pglogic._semantic_part(o.tree)
                     ELSE o.tree END,
                terms[1:n.n_terms], candidate_terms, vectors[1:n.n_terms], o.ops, truth);
        ELSE
            guide := pglogic._vector(o.given_guide, 'the guide');
            IF vector_dims(guide) <> c.dim THEN
                RAISE EXCEPTION 'The guide vector has % dimensions; corpus % needs % (model %)',
                    vector_dims(guide), quote_literal(corpus), c.dim, quote_literal(c.model)
                    USING ERRCODE = '22023';
            END IF;
        END IF;
    END IF;
    IF plan = 'guide' THEN
        candidate_terms := '{}';
    END IF;
    statement := CASE WHEN use_passages THEN pglogic._passage_statement(parts, p.scans)
                      WHEN plan = 'knn' THEN pglogic._knn_statement(parts)
                      ELSE pglogic._candidates_statement(parts, p.scans) END;
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
    EXECUTE format('ALTER FUNCTION pglogic._term_vectors(text, text, integer, text[], integer, '
                   'jsonb, jsonb) SET search_path = %s', path);
    EXECUTE format('ALTER FUNCTION pglogic._with_contexts(jsonb, text[], integer, jsonb, vector[],'
                   ' double precision) SET search_path = %s', path);
END
$do$;
