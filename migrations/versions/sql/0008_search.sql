-- Revision 0008: the statements of sql/search.sql that are new or changed since the revision before, written
-- by migrations/sqlfiles.py; frozen: never edit it. It runs between the file's DO blocks (applied).

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
