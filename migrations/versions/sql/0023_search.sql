-- Revision 0023: the statements of sql/search.sql that are new or changed since the revision before, written
-- by migrations/sqlfiles.py; frozen: never edit it. It runs between the file's DO blocks (applied).

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
