-- Objects outside schema pglogic that depend on an object inside it (a view, a foreign key, a
-- trigger, a column default, a function of an application), one description per row. Dropping
-- the schema (a downgrade to base) would drop them too. Read by migrations/env.py (the downgrade
-- to base refuses while any exists, unless told to cascade) and by `pglogic db downgrade base`
-- (which lists them before it asks).
WITH inside AS (
    SELECT 'pg_class'::regclass AS cls, c.oid FROM pg_class c
    WHERE c.relnamespace = to_regnamespace('pglogic')
    UNION ALL
    SELECT 'pg_proc'::regclass, p.oid FROM pg_proc p
    WHERE p.pronamespace = to_regnamespace('pglogic')
    UNION ALL
    SELECT 'pg_type'::regclass, t.oid FROM pg_type t
    WHERE t.typnamespace = to_regnamespace('pglogic')
), dependent AS (
    SELECT d.classid, d.objid,
        CASE d.classid
            WHEN 'pg_class'::regclass THEN
                (SELECT c.relnamespace FROM pg_class c WHERE c.oid = d.objid)
            WHEN 'pg_proc'::regclass THEN
                (SELECT p.pronamespace FROM pg_proc p WHERE p.oid = d.objid)
            WHEN 'pg_type'::regclass THEN
                (SELECT t.typnamespace FROM pg_type t WHERE t.oid = d.objid)
            WHEN 'pg_constraint'::regclass THEN
                (SELECT c.connamespace FROM pg_constraint c WHERE c.oid = d.objid)
            WHEN 'pg_rewrite'::regclass THEN
                (SELECT c.relnamespace FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
                 WHERE r.oid = d.objid)
            WHEN 'pg_trigger'::regclass THEN
                (SELECT c.relnamespace FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
                 WHERE g.oid = d.objid)
            WHEN 'pg_attrdef'::regclass THEN
                (SELECT c.relnamespace FROM pg_attrdef a JOIN pg_class c ON c.oid = a.adrelid
                 WHERE a.oid = d.objid)
            WHEN 'pg_policy'::regclass THEN
                (SELECT c.relnamespace FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
                 WHERE p.oid = d.objid)
        END AS nsp,
        CASE d.classid  -- a view's rule is described as its view
            WHEN 'pg_rewrite'::regclass THEN
                (SELECT o.type || ' ' || o.identity
                 FROM pg_rewrite r, pg_identify_object('pg_class'::regclass, r.ev_class, 0) o
                 WHERE r.oid = d.objid)
            ELSE (SELECT o.type || ' ' || o.identity
                  FROM pg_identify_object(d.classid, d.objid, 0) o)
        END AS what
    FROM pg_depend d
    JOIN inside i ON d.refclassid = i.cls AND d.refobjid = i.oid
    WHERE d.deptype IN ('n', 'a')
)
SELECT DISTINCT what FROM dependent
WHERE nsp IS DISTINCT FROM to_regnamespace('pglogic')
ORDER BY what
