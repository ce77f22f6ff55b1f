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

-- The engine's defaults (pglogic.engine.defaults), one row each in pglogic.defaults, which the
-- migrations fill: the default of option or planner constant name. VOLATILE, so that it reads
-- the table with a snapshot of its own: a search that began before a migration committed but
-- runs its new functions sees the rows that migration wrote (tests/test_upgrade_live.py).
CREATE OR REPLACE FUNCTION pglogic._default(name text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $fn$
DECLARE
    v jsonb;
BEGIN
    SELECT d.value INTO v FROM pglogic.defaults d WHERE d.name = _default.name;
    IF v IS NULL THEN
        RAISE EXCEPTION 'pglogic.defaults has no row %', quote_literal(name)
            USING ERRCODE = '42704', HINT = 'The migrations wrote one row per default, with the '
                'values of pglogic/engine/defaults.py; put the row back with that value.';
    END IF;
    RETURN v;
END
$fn$;

-- The options of a query with the engine's defaults (the rows names of pglogic.defaults) for
-- those it leaves out or sets to null; a default without its row is an error, never null
-- (VOLATILE, as pglogic._default).
CREATE OR REPLACE FUNCTION pglogic._with_defaults(opts jsonb, names text[])
RETURNS jsonb
LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $fn$
DECLARE
    found jsonb := coalesce((SELECT jsonb_object_agg(d.name, d.value) FROM pglogic.defaults d
                             WHERE d.name = ANY (names)), '{}');
    missing text;
BEGIN
    SELECT string_agg(quote_literal(n), ', ' ORDER BY n) INTO missing
    FROM unnest(names) AS n WHERE NOT found ? n;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'pglogic.defaults has no row %', missing
            USING ERRCODE = '42704', HINT = 'The migrations wrote one row per default, with the '
                'values of pglogic/engine/defaults.py; put the row back with that value.';
    END IF;
    RETURN found || coalesce((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(opts) AS e
                              WHERE jsonb_typeof(e.value) <> 'null'), '{}');
END
$fn$;

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
    g double precision;
BEGIN
    -- since migration 0006: the NOT (1 - x)^G (pglogic.engine.operators.complement_power)
    IF kind = 'not' AND name ~ '^complement\^[0-9]*\.?[0-9]+(e[-+]?[0-9]+)?$' THEN
        BEGIN
            g := substr(name, 12)::double precision;
        EXCEPTION WHEN numeric_value_out_of_range THEN
            -- (since 0017) past a double's range, as Python's float() reads it: inf, or 0.0 for a
            -- negative exponent; then refused below like any other, not as a failed cast
            g := CASE WHEN name ~ 'e-' THEN 0 ELSE 'Infinity'::double precision END;
        END;
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
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $fn$
DECLARE
    usage constant text := 'use a preset (product-max-strong, product-max, itlr, godel, '
        'lukasiewicz, product) or and=NAME,or=NAME,not=NAME with AND in {product, sum, min, '
        'lukasiewicz}, OR in {sum, max, probsum, lukasiewicz}, NOT in {complement, reciprocal, '
        'complement^G}';
    strong constant text[] := ARRAY['product', 'max', 'complement^1.25'];
    dflt text[];  -- the default family's (pglogic.defaults), for a partial spec
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
    IF spec IS NULL OR jsonb_typeof(spec) = 'null'
       OR (jsonb_typeof(spec) = 'string' AND regexp_replace(spec #>> '{}', '\s+', '', 'g') = '')
    THEN
        RETURN pglogic._resolve_operators(pglogic._default('operators'));
    END IF;
    IF jsonb_typeof(spec) = 'object' THEN
        dflt := pglogic._resolve_operators(pglogic._default('operators'));
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
    IF txt = 'product-max-strong' THEN
        RETURN strong;
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
    dflt := pglogic._resolve_operators(pglogic._default('operators'));
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
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $fn$
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
    IF spec IS NULL OR jsonb_typeof(spec) = 'null'
       OR (jsonb_typeof(spec) = 'string' AND btrim(spec #>> '{}') = '') THEN
        RETURN pglogic._resolve_truth(pglogic._default('truth'));
    END IF;
    IF jsonb_typeof(spec) = 'string' THEN
        raw := spec #>> '{}';
        name := lower(btrim(raw));
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
        -- since migration 0017 a node's other keys are refused, as the documented schema says
        -- (a "term" beside an "op" dropped the operator without a word)
        IF EXISTS (SELECT FROM jsonb_object_keys(node) AS x(key) WHERE key NOT IN ('term', 'vector'))
        THEN
            RAISE EXCEPTION 'Invalid query node %: a term is {"term": "text"} with an optional '
                '"vector", no other key', pglogic._show(node) USING ERRCODE = '22023';
        END IF;
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
    IF EXISTS (SELECT FROM jsonb_object_keys(node) AS x(key) WHERE key NOT IN ('op', 'arg', 'args'))
       OR (op IN ('and', 'or') AND node ? 'arg') OR (node ? 'arg' AND node ? 'args') THEN
        RAISE EXCEPTION 'Invalid query node %: an operator is {"op": "and"|"or", "args": [...]} or '
            '{"op": "not", "arg": ...}, no other key', pglogic._show(node) USING ERRCODE = '22023';
    END IF;
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

-- Since migration 0012: each AND phrase of pglogic._and_texts with its polarity, true when one
-- of its ANDs sits under an even number of NOTs (pglogic.engine.conjunction.negated_and_texts:
-- the false ones keep their best passage under the passage scores that blend).
CREATE OR REPLACE FUNCTION pglogic._and_text_polarity(node jsonb, positive boolean, acc jsonb)
RETURNS jsonb
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
        RETURN pglogic._and_text_polarity(coalesce(node -> 'arg', node -> 'args' -> 0),
                                          NOT positive, acc);
    END IF;
    IF op = 'and' THEN
        phrase := pglogic._and_phrase(node);
        IF phrase IS NOT NULL THEN
            acc := jsonb_set(acc, ARRAY[phrase],
                             to_jsonb(coalesce((acc ->> phrase)::boolean, false) OR positive));
        END IF;
    END IF;
    FOR child IN SELECT a.value FROM jsonb_array_elements(node -> 'args') WITH ORDINALITY AS a
                 ORDER BY a.ordinality LOOP
        acc := pglogic._and_text_polarity(child, positive, acc);
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
-- once beside a negated operand. Since migration 0007: lexical term matches[j] is column
-- "l{j-1}", its truth value as it is (no truth map).
DROP FUNCTION IF EXISTS pglogic._score_sql(jsonb, text[], text[], text);
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

-- pglogic.engine.filters.parse_filters: the query's "filters" as a list of the two explicit
-- forms, {"contains": {...}} and {"key": KEY, "op": OP, "value": VALUE}, with its refusals word
-- for word. A filter is "KEY=VALUE" text (=, !=, <, <=, >, >=: parse_filter; the value read as
-- JSON when it parses, else as a string; text starting with { is a JSON object), an object the
-- metadata contains, {"contains": {...}} or {"key": ..., "op": ..., "value": ...} (an object
-- with a key "key", "op" or "value" is that form); one filter or a list of them; null: none.
CREATE OR REPLACE FUNCTION pglogic._parse_filters(filters jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    -- pglogic.engine.filters.FORMS
    forms constant text := 'a filter is "KEY=VALUE" or "KEY>=VALUE" (=, !=, <, <=, >, >=), an'
        || ' object the metadata contains like {"places": ["usa"]}, {"contains": {...}} or'
        || ' {"key": KEY, "op": OP, "value": VALUE}; give one filter or a list of them';
    explicit constant text[] := ARRAY['key', 'op', 'value'];
    -- Python reads a JSON number from here up as an infinity (2^1024 - 2^970)
    overflow constant numeric := 179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792;
    out jsonb := '[]';
    item jsonb;
    obj jsonb;
    checked jsonb;
    m text[];
    op text;
    raw text;
    val jsonb;
    keys text;
BEGIN
    IF filters IS NULL OR jsonb_typeof(filters) = 'null' THEN
        RETURN out;
    END IF;
    FOR item IN SELECT e FROM jsonb_array_elements(CASE WHEN jsonb_typeof(filters) = 'array'
                                                        THEN filters
                                                        ELSE jsonb_build_array(filters) END)
                 WITH ORDINALITY AS x(e, n) ORDER BY n LOOP
        obj := NULL;
        IF jsonb_typeof(item) = 'string' AND left(btrim(item #>> '{}', E' \t\n\r'), 1) = '{' THEN
            BEGIN
                obj := btrim(item #>> '{}', E' \t\n\r')::jsonb;
            EXCEPTION
                WHEN untranslatable_character THEN  -- \u0000
                    RAISE EXCEPTION 'A filter cannot contain a NUL character (\x00)'
                        USING ERRCODE = '22023';
                WHEN data_exception THEN
                    obj := NULL;
            END;
            IF jsonb_typeof(obj) IS DISTINCT FROM 'object' THEN
                RAISE EXCEPTION 'Invalid filter %: not a JSON object; %', pglogic._show(item), forms
                    USING ERRCODE = '22023';
            END IF;
        ELSIF jsonb_typeof(item) = 'string' THEN
            m := regexp_match(item #>> '{}', '^[ \t\n\r]*([A-Za-z_][A-Za-z0-9_.-]*)[ \t\n\r]*(.*)$');
            op := CASE WHEN left(m[2], 2) IN ('!=', '<=', '>=') THEN left(m[2], 2)
                       WHEN left(m[2], 1) IN ('=', '<', '>') THEN left(m[2], 1) END;
            IF op IS NULL THEN
                RAISE EXCEPTION 'Invalid filter %: %', pglogic._show(item), forms
                    USING ERRCODE = '22023';
            END IF;
            raw := btrim(substr(m[2], length(op) + 1), E' \t\n\r');
            BEGIN
                val := raw::jsonb;
            EXCEPTION
                WHEN untranslatable_character THEN
                    RAISE EXCEPTION 'A filter cannot contain a NUL character (\x00)'
                        USING ERRCODE = '22023';
                WHEN data_exception THEN
                    val := to_jsonb(raw);
            END;
            obj := jsonb_build_object('key', m[1], 'op', op, 'value', val);
        ELSIF jsonb_typeof(item) = 'object' THEN
            obj := item;
        ELSE
            RAISE EXCEPTION 'Invalid filter: got %; %',
                CASE jsonb_typeof(item) WHEN 'number' THEN 'a number'
                                        WHEN 'boolean' THEN 'a boolean'
                                        WHEN 'array' THEN 'a list inside the list'
                                        ELSE 'null' END, forms
                USING ERRCODE = '22023';
        END IF;
        SELECT string_agg(pglogic._show(to_jsonb(k)), ', ' ORDER BY n) INTO keys
        FROM jsonb_object_keys(obj) WITH ORDINALITY AS x(k, n);
        IF obj ? 'contains' THEN
            IF (SELECT count(*) FROM jsonb_object_keys(obj)) <> 1
               OR jsonb_typeof(obj -> 'contains') <> 'object' THEN
                RAISE EXCEPTION 'Invalid filter with keys %: {"contains": {...}} takes one object'
                    ' and no other key; %', keys, forms USING ERRCODE = '22023';
            END IF;
            checked := obj -> 'contains';
            obj := jsonb_build_object('contains', checked);
        ELSIF obj ?| explicit THEN
            IF (SELECT count(*) FROM jsonb_object_keys(obj)) <> 3 OR NOT obj ?& explicit THEN
                RAISE EXCEPTION 'Invalid filter with keys %: {"key": KEY, "op": OP, "value": VALUE}'
                    ' takes these three keys and no other (for metadata with a field named key, op'
                    ' or value, use {"contains": {...}}); %', keys, forms USING ERRCODE = '22023';
            END IF;
            IF jsonb_typeof(obj -> 'key') <> 'string' THEN
                RAISE EXCEPTION 'Invalid filter: "key" takes a string (got %)',
                    pglogic._json_kind(obj -> 'key') USING ERRCODE = '22023';
            END IF;
            IF jsonb_typeof(obj -> 'op') <> 'string'
               OR NOT (obj ->> 'op') = ANY (ARRAY['=', '!=', '<', '<=', '>', '>=']) THEN
                RAISE EXCEPTION 'Invalid filter: "op" is one of =, !=, <, <=, >, >= (got %)',
                    pglogic._json_kind(obj -> 'op') USING ERRCODE = '22023';
            END IF;
            checked := obj -> 'value';
        ELSE
            checked := obj;
            obj := jsonb_build_object('contains', checked);
        END IF;
        IF EXISTS (SELECT FROM jsonb_path_query(checked, 'strict $.**') AS v(e)
                   WHERE jsonb_typeof(e) = 'number' AND abs((e #>> '{}')::numeric) >= overflow) THEN
            RAISE EXCEPTION 'Invalid filter: a number is out of range (NaN, an infinity or past'
                ' 1.8e308)' USING ERRCODE = '22023';
        END IF;
        out := out || jsonb_build_array(obj);
    END LOOP;
    RETURN out;
END
$fn$;

-- pglogic.engine.filters._kind: what a JSON value is, in the words of a refusal.
CREATE OR REPLACE FUNCTION pglogic._json_kind(value jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE jsonb_typeof(value) WHEN 'string' THEN pglogic._show(value)
                               WHEN 'number' THEN 'a number' WHEN 'boolean' THEN 'a boolean'
                               WHEN 'array' THEN 'a list' WHEN 'object' THEN 'an object'
                               ELSE 'null' END;

-- The metadata filters of the query's "filters" (any form pglogic._parse_filters reads) as one
-- SQL condition on column col, text for text what pglogic.engine.filters.filters_sql writes,
-- with the placeholders of its parameters numbered: the i-th parameter, in the order
-- filters_sql makes them, is $<slot>[i] (a text[] of their values, which pglogic.search
-- binds), with the semantics of pglogic.engine.filters.
CREATE OR REPLACE FUNCTION pglogic._filters_sql(
    filters jsonb, col text, slot integer, OUT condition text, OUT params text[]
)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
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
    FOR f IN SELECT e FROM jsonb_array_elements(pglogic._parse_filters(filters))
                 WITH ORDINALITY AS x(e, n) ORDER BY n LOOP
        IF f ? 'contains' THEN
            params := params || (f -> 'contains')::text;
            parts := parts || format('%s @> $%s[%s]::jsonb', col, slot, cardinality(params));
            CONTINUE;
        END IF;
        key := f ->> 'key';
        op := f ->> 'op';
        val := f -> 'value';
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

-- pglogic.engine.plans.default_depth: per-term candidate depth from k and the number of terms
-- (depth_per_k and depth_floor of pglogic.defaults).
CREATE OR REPLACE FUNCTION pglogic._default_depth(k bigint, n_terms integer)
RETURNS bigint
LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN GREATEST(k, LEAST(1000, GREATEST(pglogic._default('depth_floor')::integer,
                                        ceil(pglogic._default('depth_per_k')::integer
                                             * k::double precision
                                             * sqrt(n_terms::double precision))))::bigint);

-- pglogic.engine.plans.guide_depth: the guide's scan, the terms' depth and at least a query's of
-- guide_terms terms.
CREATE OR REPLACE FUNCTION pglogic._guide_depth(k bigint, depth bigint)
RETURNS bigint
LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN GREATEST(depth, pglogic._default_depth(k, pglogic._default('guide_terms')::integer));

-- pglogic.engine.plans.guide_only_depth: the guide's scan when it is the only one
-- (guide_only_factor times guide_depth), thinned under a filter that keeps the fraction
-- selectivity of the rows.
CREATE OR REPLACE FUNCTION pglogic._guide_only_depth(k bigint, selectivity double precision)
RETURNS bigint
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $fn$
DECLARE
    factor constant integer := pglogic._default('guide_only_factor')::integer;
    unfiltered bigint := LEAST(1000, factor * pglogic._guide_depth(k, pglogic._default_depth(k, 1)));
    wider bigint;
    thinned bigint;
BEGIN
    IF selectivity IS NULL OR NOT (selectivity > 0 AND selectivity < 1) THEN
        RETURN unfiltered;
    END IF;
    wider := ceil(k / selectivity)::bigint;
    thinned := ceil(selectivity * LEAST(1000, factor * pglogic._guide_depth(
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
    IF node ? 'match' OR lower(node ->> 'op') <> 'or' THEN
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

-- pglogic.engine.plans.prefer_exact (exact_switch of pglogic.defaults): whether scoring every
-- row that passes a filter beats the filtered HNSW scans of plan 'terms', 'guide' or 'union'.
CREATE OR REPLACE FUNCTION pglogic._prefer_exact(
    matching_rows double precision, k bigint, candidate_terms integer, plan text,
    selectivity double precision
)
RETURNS boolean
LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN matching_rows <= pglogic._default('exact_switch')::integer * CASE plan
    WHEN 'guide' THEN pglogic._guide_only_depth(k, selectivity)
    WHEN 'union' THEN candidate_terms
        * GREATEST(k::double precision, pglogic._default_depth(k, 1) * selectivity)
    ELSE candidate_terms * pglogic._default_depth(k, candidate_terms)
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

-- Since migration 0014: pglogic.engine.negation.contexts. Each term negated directly inside an
-- AND (an operand {"op": "not", "arg": TERM} of the AND, nested ANDs spliced in as
-- pglogic._flat_args does) gets the AND's positive term operands as its context, added to acc
-- ({"text": ["context", ...]}) in order of first appearance, no text twice. Operators are read
-- as _collect_terms reads them (any case; a NOT's operand in "arg" or "args").
CREATE OR REPLACE FUNCTION pglogic._not_contexts(node jsonb, acc jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    op text;
    args jsonb[];
    child jsonb;
    operand jsonb;
    positive jsonb := '[]';
    t text;
    p text;
    known jsonb;
BEGIN
    IF jsonb_typeof(node) <> 'object' OR node ? 'term' OR node ? 'match' THEN
        RETURN acc;  -- a term or a lexical term
    END IF;
    op := lower(node ->> 'op');
    IF op = 'not' THEN
        RETURN pglogic._not_contexts(coalesce(node -> 'arg', node -> 'args' -> 0), acc);
    END IF;
    IF op IS DISTINCT FROM 'and' AND op IS DISTINCT FROM 'or' THEN
        RETURN acc;
    END IF;
    args := CASE WHEN op = 'and' THEN pglogic._flat_args(node, 'and')
                 ELSE ARRAY(SELECT x.e FROM jsonb_array_elements(node -> 'args')
                            WITH ORDINALITY AS x(e, n) ORDER BY x.n) END;
    IF op = 'and' THEN
        FOREACH child IN ARRAY args LOOP
            IF jsonb_typeof(child) = 'string' THEN
                positive := positive || jsonb_build_array(child #>> '{}');
            ELSIF jsonb_typeof(child) = 'object' AND child ? 'term' THEN
                positive := positive || jsonb_build_array(child ->> 'term');
            END IF;
        END LOOP;
        IF jsonb_array_length(positive) > 0 THEN
            FOREACH child IN ARRAY args LOOP
                CONTINUE WHEN jsonb_typeof(child) <> 'object' OR child ? 'term'
                    OR child ? 'match' OR lower(child ->> 'op') IS DISTINCT FROM 'not';
                operand := coalesce(child -> 'arg', child -> 'args' -> 0);
                t := CASE WHEN jsonb_typeof(operand) = 'string' THEN operand #>> '{}'
                          WHEN jsonb_typeof(operand) = 'object' AND operand ? 'term'
                          THEN operand ->> 'term' END;
                CONTINUE WHEN t IS NULL;  -- a NOT of a group or of a lexical term
                known := coalesce(acc -> t, '[]');
                FOR p IN SELECT x.e FROM jsonb_array_elements_text(positive)
                         WITH ORDINALITY AS x(e, n) ORDER BY x.n LOOP
                    IF NOT known ? p THEN
                        known := known || jsonb_build_array(p);
                    END IF;
                END LOOP;
                acc := jsonb_set(acc, ARRAY[t], known);
            END LOOP;
        END IF;
    END IF;
    FOREACH child IN ARRAY args LOOP
        acc := pglogic._not_contexts(child, acc);
    END LOOP;
    RETURN acc;
END
$fn$;

-- Since migration 0014: pglogic.engine.negation.projected. normalise(b - lam * P b), P the
-- projection onto the span of context (modified Gram-Schmidt in double precision; a context
-- vector in the span of the ones before it (less than 1e-6 of its norm left) is skipped, and b
-- is kept when less than 1e-6 of its norm would be left).
CREATE OR REPLACE FUNCTION pglogic._projected(b vector, context vector[], lam double precision)
RETURNS vector
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
DECLARE
    v constant double precision[] := b::real[]::double precision[];
    dim constant integer := cardinality(b::real[]);
    basis double precision[] := '{}';  -- the orthonormal vectors, one after the other
    m integer := 0;
    u double precision[];
    r double precision[];
    q double precision[];
    nrm double precision;
    d double precision;
    ctx vector;
    i integer;
BEGIN
    FOREACH ctx IN ARRAY context LOOP
        u := ctx::real[]::double precision[];
        FOR i IN 1 .. m LOOP
            q := basis[(i - 1) * dim + 1 : i * dim];
            d := pglogic._dot(q, u);  -- once, before the array (not once per element)
            u := ARRAY(SELECT x - d * y FROM unnest(u, q) WITH ORDINALITY AS z(x, y, o)
                       ORDER BY o);
        END LOOP;
        nrm := sqrt(pglogic._dot(u, u));
        IF nrm > 1e-6 * sqrt(pglogic._dot(ctx::real[]::double precision[],
                                          ctx::real[]::double precision[])) THEN
            basis := basis || ARRAY(SELECT x / nrm FROM unnest(u) WITH ORDINALITY AS z(x, o)
                                    ORDER BY o);
            m := m + 1;
        END IF;
    END LOOP;
    r := v;
    FOR i IN 1 .. m LOOP
        q := basis[(i - 1) * dim + 1 : i * dim];
        d := lam * pglogic._dot(q, v);
        r := ARRAY(SELECT x - d * y FROM unnest(r, q) WITH ORDINALITY AS z(x, y, o) ORDER BY o);
    END LOOP;
    nrm := sqrt(pglogic._dot(r, r));
    IF m = 0 OR nrm <= 1e-6 * sqrt(pglogic._dot(v, v)) THEN
        RETURN b;
    END IF;
    RETURN ARRAY(SELECT x / nrm FROM unnest(r) WITH ORDINALITY AS z(x, o) ORDER BY o)::vector;
END
$fn$;

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
    -- $7 goes as a regconfig (since 0016): as text, the statement's $7::regconfig looked the
    -- configuration up again for every row it matched (bench/results/not_mention_latency.md)
    EXECUTE format(wrap, sims, lex, p.statement)
        INTO ids, external_ids, titles, metadatas, scores, similarity, lexicals
        USING p.vectors, p.guide, p.depth, p.gdepth, p.k, p.filter_values,
              p.text_config::regconfig, p.lexical, p.terms;
    IF p.exact_statement IS NOT NULL AND coalesce(cardinality(ids), 0) < p.k THEN
        -- The filtered index scans found fewer than k rows (a rare filter, a scan that stopped
        -- at hnsw.max_scan_tuples or at ef_search without iterative scans), or the lexical
        -- scans did (few documents match): score every matching row instead, as
        -- pglogic.store.search.search does.
        EXECUTE format(wrap, sims, lex, p.exact_statement)
            INTO ids, external_ids, titles, metadatas, scores, similarity, lexicals
            USING p.vectors, p.guide, p.depth, p.gdepth, p.k, p.filter_values,
                  p.text_config::regconfig, p.lexical, p.terms;
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
                                        '$7 regconfig: the text search configuration of '
                                        'the lexical index (text works too, slower: since '
                                        '0016)',
                                        '$8 text[]: the lexical terms ($8[j]: lexical term j)',
                                        '$9 text[]: the scored texts ($9[i]: text i, whose '
                                        'words floor a negated term: since 0015)'),
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
        'truth', p.truth,
        'passages', p.passage_table)
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
