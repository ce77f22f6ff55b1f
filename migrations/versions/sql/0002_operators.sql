-- pglogic fuzzy operators as plain SQL functions (installed by migration 0002).
--
-- The same definitions as pglogic/operators.py (the SQL face the compiler inlines and the NumPy
-- reference face), so hand-written SQL ranks like pglogic does:
--
--   SELECT id, pglogic.and_product(
--            pglogic.truth_clamp(1 - (embedding <=> $1)),
--            pglogic.not_complement(pglogic.truth_clamp(1 - (embedding <=> $2)))) AS score
--   FROM pglogic.corpus_1 ORDER BY score DESC LIMIT 10;
--
-- n-ary operators take one or more operands (VARIADIC double precision[]), fold them left to
-- right exactly like the compiler's expressions, and return NULL when any operand is NULL.
-- Truth maps and NOTs are STRICT: NULL in, NULL out.

CREATE OR REPLACE FUNCTION pglogic._fold(op text, xs double precision[])
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    x double precision;
    acc double precision;
    n integer := 0;
BEGIN
    IF xs IS NULL OR cardinality(xs) = 0 THEN
        RAISE EXCEPTION 'pglogic.% needs at least one operand', op USING ERRCODE = '22023';
    END IF;
    FOREACH x IN ARRAY xs LOOP
        IF x IS NULL THEN
            RETURN NULL;
        END IF;
        n := n + 1;
        IF n = 1 THEN
            acc := CASE WHEN op = 'or_probsum' THEN 1.0 - x ELSE x END;
            CONTINUE;
        END IF;
        acc := CASE op
            WHEN 'and_product' THEN acc * x
            WHEN 'and_sum' THEN acc + x
            WHEN 'and_lukasiewicz' THEN acc + x
            WHEN 'or_sum' THEN acc + x
            WHEN 'or_lukasiewicz' THEN acc + x
            WHEN 'and_min' THEN LEAST(acc, x)
            WHEN 'or_max' THEN GREATEST(acc, x)
            WHEN 'or_probsum' THEN acc * (1.0 - x)
        END;
    END LOOP;
    RETURN CASE op
        -- max(0, Σx − (n−1)): the constant is subtracted even for one operand, as in Python
        WHEN 'and_lukasiewicz' THEN GREATEST(0.0, acc - (n - 1)::double precision)
        WHEN 'or_lukasiewicz' THEN LEAST(1.0, acc)
        -- 1 − Π(1−x), also for one operand (1 − (1 − x)), as in Python
        WHEN 'or_probsum' THEN 1.0 - acc
        ELSE acc
    END;
END
$fn$;

COMMENT ON FUNCTION pglogic._fold(text, double precision[]) IS
    'Internal: left fold of the n-ary pglogic operators (see pglogic.and_product etc.)';

-- AND ---------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pglogic.and_product(VARIADIC xs double precision[])
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pglogic._fold('and_product', xs);
COMMENT ON FUNCTION pglogic.and_product(double precision[]) IS
    'Fuzzy AND x·y·… (ITLR default). Example: SELECT pglogic.and_product(0.5, 0.5) -- 0.25';

CREATE OR REPLACE FUNCTION pglogic.and_sum(VARIADIC xs double precision[])
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pglogic._fold('and_sum', xs);
COMMENT ON FUNCTION pglogic.and_sum(double precision[]) IS
    'Fuzzy AND x+y+…. Example: SELECT pglogic.and_sum(0.5, 0.25) -- 0.75';

CREATE OR REPLACE FUNCTION pglogic.and_min(VARIADIC xs double precision[])
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pglogic._fold('and_min', xs);
COMMENT ON FUNCTION pglogic.and_min(double precision[]) IS
    'Fuzzy AND min(x, y, …) (Gödel t-norm). Example: SELECT pglogic.and_min(0.5, 0.25) -- 0.25';

CREATE OR REPLACE FUNCTION pglogic.and_lukasiewicz(VARIADIC xs double precision[])
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pglogic._fold('and_lukasiewicz', xs);
COMMENT ON FUNCTION pglogic.and_lukasiewicz(double precision[]) IS
    'Fuzzy AND max(0, Σx − (n−1)). Example: SELECT pglogic.and_lukasiewicz(0.75, 0.5) -- 0.25';

-- OR ----------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pglogic.or_sum(VARIADIC xs double precision[])
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pglogic._fold('or_sum', xs);
COMMENT ON FUNCTION pglogic.or_sum(double precision[]) IS
    'Fuzzy OR x+y+… (ITLR default). Example: SELECT pglogic.or_sum(0.5, 0.25) -- 0.75';

CREATE OR REPLACE FUNCTION pglogic.or_max(VARIADIC xs double precision[])
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pglogic._fold('or_max', xs);
COMMENT ON FUNCTION pglogic.or_max(double precision[]) IS
    'Fuzzy OR max(x, y, …) (Gödel t-conorm). Example: SELECT pglogic.or_max(0.5, 0.25) -- 0.5';

CREATE OR REPLACE FUNCTION pglogic.or_probsum(VARIADIC xs double precision[])
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pglogic._fold('or_probsum', xs);
COMMENT ON FUNCTION pglogic.or_probsum(double precision[]) IS
    'Fuzzy OR 1 − Π(1−x) (probabilistic sum). Example: SELECT pglogic.or_probsum(0.5, 0.5) -- 0.75';

CREATE OR REPLACE FUNCTION pglogic.or_lukasiewicz(VARIADIC xs double precision[])
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pglogic._fold('or_lukasiewicz', xs);
COMMENT ON FUNCTION pglogic.or_lukasiewicz(double precision[]) IS
    'Fuzzy OR min(1, Σx). Example: SELECT pglogic.or_lukasiewicz(0.75, 0.5) -- 1';

-- NOT ---------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pglogic.not_complement(x double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (1.0 - x);
COMMENT ON FUNCTION pglogic.not_complement(double precision) IS
    'Fuzzy NOT 1 − x (default). Example: SELECT pglogic.not_complement(0.25) -- 0.75';

CREATE OR REPLACE FUNCTION pglogic.not_reciprocal(x double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (1.0 / GREATEST(x, 1e-06));
COMMENT ON FUNCTION pglogic.not_reciprocal(double precision) IS
    'Fuzzy NOT 1 / max(x, 1e-6) (no division by zero). Example: SELECT pglogic.not_reciprocal(0.5) -- 2';

-- similarity -> truth -----------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pglogic.truth_clamp(s double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN GREATEST(0.0, LEAST(1.0, s));
COMMENT ON FUNCTION pglogic.truth_clamp(double precision) IS
    'Cosine similarity to truth: max(0, min(1, s)) (default). Example: SELECT pglogic.truth_clamp(-0.3) -- 0';

CREATE OR REPLACE FUNCTION pglogic.truth_affine(s double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN ((s + 1.0) / 2.0);
COMMENT ON FUNCTION pglogic.truth_affine(double precision) IS
    'Cosine similarity to truth: (s + 1) / 2. Example: SELECT pglogic.truth_affine(0) -- 0.5';
