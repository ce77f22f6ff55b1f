-- Revision 0003: the statements of sql/search.sql that are new or changed since the revision before, written
-- by migrations/sqlfiles.py; frozen: never edit it. It runs between the file's DO blocks (applied).

-- Resolve an operator family like pglogic.operators.resolve_family: returns {and, or, not}.
-- Since migration 0003 the default (and the fill-in for partial specs) is product-max.
CREATE OR REPLACE FUNCTION pglogic._resolve_operators(spec jsonb)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    usage constant text := 'use a preset (product-max, itlr, godel, lukasiewicz, product) or '
        'and=NAME,or=NAME,not=NAME with AND in {product, sum, min, lukasiewicz}, '
        'OR in {sum, max, probsum, lukasiewicz}, NOT in {complement, reciprocal}';
    dflt constant text[] := ARRAY['product', 'max', 'complement'];
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
    IF txt = '' OR txt = 'product-max' THEN
        RETURN dflt;
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
