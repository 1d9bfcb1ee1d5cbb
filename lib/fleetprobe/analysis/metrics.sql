-- fleetprobe metrics: one view per number of the paper's Table 2 (and Table 3, the
-- remediation re-probe and the figures), computed from the run traces only.
--
-- Inputs, loaded by fleetprobe/analysis/db.py:
--   events     every line of every data/traces/<run>/events.jsonl (columns: EVENTS.md;
--              absent fields are NULL)
--   <experiment>_events  the events of one experiment with the fields EVENTS.md gives it
--              (its own and the common ones), for views that keep every field of a line:
--              the 170 others would be NULL columns every reader converts and drops
--   manifests  one row per run directory from manifest.json (profile = target.server_profile)
--
-- Conventions:
--   rate views    run_id [, variant_write, variant_search], numerator, denominator
--                 denominator = events that carry a judgement (a NULL judgement, e.g. a
--                 probe lost to a transport error, is not counted as either outcome)
--   latency views run_id, n, p50, p95, p99, max   (milliseconds, quantile_cont)
-- Wilson intervals are added in Python (fleetprobe.analysis.base.stats).

-- ---------------------------------------------------------------------------------------
-- Runs
-- ---------------------------------------------------------------------------------------

CREATE VIEW runs AS
WITH seen AS (
    SELECT run_id, any_value(experiment) AS experiment, count(*) AS n_events
    FROM events GROUP BY run_id
)
SELECT coalesce(m.run_id, s.run_id)                      AS run_id,
       coalesce(m.experiment, s.experiment)              AS experiment,
       coalesce(m.profile, 'unknown')                    AS profile,
       coalesce(m.target_kind, 'unknown')                AS target_kind,
       m.server_version, m.base_url, m.latency_simulated, m.seed,
       coalesce(m.complete, false)                       AS complete,
       m.incomplete_reason, m.started_at, m.ended_at, m.params, m.planned, m.executed,
       coalesce(m.has_manifest, false)                   AS has_manifest, m.packages,
       m.engine_commit,
       coalesce(s.n_events, 0)                           AS n_events
FROM manifests m FULL OUTER JOIN seen s ON m.run_id = s.run_id;

-- ---------------------------------------------------------------------------------------
-- Leakage (paper 7.1, 8.1; Table 2 leakage rows, Table 3, 9.1 re-probe, Fig. 2, Fig. 3)
-- ---------------------------------------------------------------------------------------

CREATE VIEW leakage_probes AS
SELECT * FROM leakage_events WHERE phase = 'probe';

-- probes total (paper: planned 192 / executed 192): distinct (prober, secret) pairs that got
-- an answer, over the pairs recorded; an interrupted run's shortfall against its plan is in
-- its manifest (planned vs executed) and its `complete` flag
CREATE VIEW leakage_probes_executed AS
SELECT run_id, variant_write, variant_search,
       count(DISTINCT (prober_agent, secret_id)) FILTER (WHERE status IS NOT NULL) AS numerator,
       count(DISTINCT (prober_agent, secret_id))                                 AS denominator
FROM leakage_probes GROUP BY ALL;

-- tenant-key GET exposure: expected-deny GET-by-id probes that returned the row
CREATE VIEW leakage_get_exposure AS
SELECT run_id, variant_write, variant_search,
       count(*) FILTER (WHERE leak)             AS numerator,
       count(*) FILTER (WHERE leak IS NOT NULL) AS denominator
FROM leakage_probes WHERE axis = 'get' AND expected = 'deny' GROUP BY ALL;

-- tenant-key GET miss: expected-allow GET-by-id probes that did not return the row
CREATE VIEW leakage_get_miss AS
SELECT run_id, variant_write, variant_search,
       count(*) FILTER (WHERE miss)             AS numerator,
       count(*) FILTER (WHERE miss IS NOT NULL) AS denominator
FROM leakage_probes WHERE axis = 'get' AND expected = 'allow' GROUP BY ALL;

-- search leak: expected-deny search probes whose results carried the secret
CREATE VIEW leakage_search_leak AS
SELECT run_id, variant_write, variant_search,
       count(*) FILTER (WHERE leak)             AS numerator,
       count(*) FILTER (WHERE leak IS NOT NULL) AS denominator
FROM leakage_probes WHERE axis = 'search' AND expected = 'deny' GROUP BY ALL;

-- search miss: expected-allow search probes whose results lacked the secret
CREATE VIEW leakage_search_miss AS
SELECT run_id, variant_write, variant_search,
       count(*) FILTER (WHERE miss)             AS numerator,
       count(*) FILTER (WHERE miss IS NOT NULL) AS denominator
FROM leakage_probes WHERE axis = 'search' AND expected = 'allow' GROUP BY ALL;

-- access latency: every answered GET-by-id probe
CREATE VIEW leakage_access_latency AS
SELECT run_id, variant_write, variant_search, count(latency_ms) AS n,
       quantile_cont(latency_ms, 0.50) AS p50, quantile_cont(latency_ms, 0.95) AS p95,
       quantile_cont(latency_ms, 0.99) AS p99, max(latency_ms) AS max
FROM leakage_probes WHERE axis = 'get' AND status IS NOT NULL GROUP BY ALL;

-- search latency: every answered search probe (Fig. 3)
CREATE VIEW leakage_search_latency AS
SELECT run_id, variant_write, variant_search, count(latency_ms) AS n,
       quantile_cont(latency_ms, 0.50) AS p50, quantile_cont(latency_ms, 0.95) AS p95,
       quantile_cont(latency_ms, 0.99) AS p99, max(latency_ms) AS max
FROM leakage_probes WHERE axis = 'search' AND status IS NOT NULL GROUP BY ALL;

-- Table 3: the agent-scoped GET-by-id probe, one row per credential x target relation
CREATE VIEW leakage_table3 AS
SELECT run_id, credential, trust, relation, expected,
       count(*)                                   AS probes,
       count(*) FILTER (WHERE returned)           AS returned,
       count(*) FILTER (WHERE leak)               AS leaks,
       count(*) FILTER (WHERE miss)               AS misses,
       string_agg(DISTINCT CAST(status AS VARCHAR), '/' ORDER BY CAST(status AS VARCHAR))
                                                  AS statuses
FROM events WHERE experiment = 'leakage' AND phase = 'agent_probe'
GROUP BY ALL;

-- paper 8.1: /whoami resolves an agent key to its bound agent and a tenant key to
-- agent_id = null (the identity the GET handler then discarded)
CREATE VIEW leakage_whoami_resolved AS
SELECT run_id,
       count(*) FILTER (WHERE status = 200 AND CASE credential
                            WHEN 'agent' THEN whoami_agent_id = prober_agent
                            ELSE whoami_agent_id IS NULL END) AS numerator,
       count(*) AS denominator
FROM events WHERE experiment = 'leakage' AND phase = 'whoami' AND status IS NOT NULL
GROUP BY run_id;

-- 9.1 remediation re-probe: returned k/n by trust x relation (paper: trust-1 cross-fleet
-- 0/36, trust-2 cross-fleet 36/36, same-fleet controls 12/12, leaks 0/96)
CREATE VIEW leakage_reprobe AS
SELECT run_id, trust, relation, expected,
       count(*) FILTER (WHERE returned)           AS returned,
       count(*) FILTER (WHERE returned IS NOT NULL) AS probes,
       count(*) FILTER (WHERE leak)               AS leaks,
       count(*) FILTER (WHERE miss)               AS misses,
       string_agg(DISTINCT CAST(status AS VARCHAR), '/' ORDER BY CAST(status AS VARCHAR))
                                                  AS statuses
FROM events WHERE experiment = 'leakage' AND phase = 'reprobe'
GROUP BY ALL;

-- trust-1 cross-fleet re-probes that returned the row (paper 0/36)
CREATE VIEW leakage_reprobe_trust1_cross_fleet AS
SELECT run_id, sum(returned) AS numerator, sum(probes) AS denominator
FROM leakage_reprobe WHERE trust = 1 AND relation = 'cross_fleet' GROUP BY run_id;

-- trust-2 cross-fleet re-probes that returned the row (paper 36/36)
CREATE VIEW leakage_reprobe_trust2_cross_fleet AS
SELECT run_id, sum(returned) AS numerator, sum(probes) AS denominator
FROM leakage_reprobe WHERE trust = 2 AND relation = 'cross_fleet' GROUP BY run_id;

-- same-fleet controls of the trust-1 denial: trust-1 same-fleet re-probes that returned the
-- row (paper 12/12 = 4 fleets x 3 rows; trust-2 same-fleet reads are in leakage_reprobe)
CREATE VIEW leakage_reprobe_same_fleet AS
SELECT run_id, sum(returned) AS numerator, sum(probes) AS denominator
FROM leakage_reprobe WHERE trust = 1 AND relation = 'same_fleet' GROUP BY run_id;

-- all re-probes that leaked (paper 0/96)
CREATE VIEW leakage_reprobe_leaks AS
SELECT run_id, sum(leaks) AS numerator, sum(probes) AS denominator
FROM leakage_reprobe GROUP BY run_id;

-- ---------------------------------------------------------------------------------------
-- Provenance (paper 7.3, 8; Table 2 provenance rows, Fig. 4)
-- ---------------------------------------------------------------------------------------

CREATE VIEW provenance_chains AS
SELECT * FROM provenance_events WHERE phase = 'chain';

-- writes that landed (2xx) over writes attempted (paper 200/200)
CREATE VIEW provenance_writes_succeeded AS
SELECT run_id,
       count(*) FILTER (WHERE status BETWEEN 200 AND 299) AS numerator,
       count(*)                                           AS denominator
FROM events WHERE experiment = 'provenance' AND phase = 'write' GROUP BY run_id;

-- writes admitted (2xx) over writes planned in the manifest (paper 200/200). Unlike
-- provenance_writes_succeeded this counts the writes a chain never sent after a rejection
-- (the unthrottled ablation); without a planned count, over the writes attempted.
CREATE VIEW provenance_writes_admitted AS
WITH written AS (
    SELECT run_id, count(*) FILTER (WHERE status BETWEEN 200 AND 299) AS admitted,
           count(*) AS attempted
    FROM events WHERE experiment = 'provenance' AND phase = 'write' GROUP BY run_id
)
SELECT w.run_id, w.admitted AS numerator,
       greatest(w.attempted,
                coalesce(TRY_CAST(json_extract_string(r.planned, '$.write') AS BIGINT), 0))
           AS denominator
FROM written w JOIN runs r USING (run_id);

-- writes the rate limiter rejected (429 after the client's retries; the unthrottled ablation
-- does not retry), over writes attempted (paper 8: pacing at 8/s eliminates them)
CREATE VIEW provenance_rate_limited AS
SELECT run_id, count(*) FILTER (WHERE status = 429) AS numerator, count(*) AS denominator
FROM events WHERE experiment = 'provenance' AND phase = 'write' GROUP BY run_id;

-- chain completeness: every planned ancestor reachable by GET (paper 50/50)
CREATE VIEW provenance_completeness AS
SELECT run_id, count(*) FILTER (WHERE complete) AS numerator,
       count(*) FILTER (WHERE complete IS NOT NULL) AS denominator
FROM provenance_chains GROUP BY run_id;

-- writer-identity accuracy: observed writer equals planned writer at every hop (paper 50/50)
CREATE VIEW provenance_writer_accuracy AS
SELECT run_id, count(*) FILTER (WHERE accurate) AS numerator,
       count(*) FILTER (WHERE accurate IS NOT NULL) AS denominator
FROM provenance_chains GROUP BY run_id;

-- depth fidelity: reconstructed depth equals planned depth (paper 50/50)
CREATE VIEW provenance_depth_fidelity AS
SELECT run_id, count(*) FILTER (WHERE depth_faithful) AS numerator,
       count(*) FILTER (WHERE depth_faithful IS NOT NULL) AS denominator
FROM provenance_chains GROUP BY run_id;

-- every successful GET of the walk back from the leaf (Fig. 4 plots these by hop)
CREATE VIEW provenance_walk_fetches AS
SELECT run_id, chain_id, hop, latency_ms FROM events
WHERE experiment = 'provenance' AND phase = 'walk' AND status BETWEEN 200 AND 299
  AND latency_ms IS NOT NULL;

-- per-hop fetch latency (paper p50 291 / p95 491 / p99 1076 ms)
CREATE VIEW provenance_hop_latency AS
SELECT run_id, count(latency_ms) AS n,
       quantile_cont(latency_ms, 0.50) AS p50, quantile_cont(latency_ms, 0.95) AS p95,
       quantile_cont(latency_ms, 0.99) AS p99, max(latency_ms) AS max
FROM provenance_walk_fetches GROUP BY run_id;

-- ---------------------------------------------------------------------------------------
-- Propagation (paper 7.4, 8; Table 2 propagation rows, Fig. 5, Fig. 6)
-- ---------------------------------------------------------------------------------------

CREATE VIEW propagation_probes AS
SELECT * FROM propagation_events WHERE phase = 'probe';

-- rate-phase fact writes that landed (paper 40 of 40 planned)
CREATE VIEW propagation_writes_succeeded AS
SELECT run_id,
       count(*) FILTER (WHERE status BETWEEN 200 AND 299) AS numerator,
       count(*)                                           AS denominator
FROM events
WHERE experiment = 'propagation' AND phase = 'write' AND coalesce("set", 'rate') = 'rate'
GROUP BY run_id;

-- visibility probes that produced a judgement (paper 200 of 200 planned)
CREATE VIEW propagation_probes_produced AS
SELECT run_id, count(*) FILTER (WHERE visible IS NOT NULL) AS numerator,
       count(*) AS denominator
FROM propagation_probes GROUP BY run_id;

-- fleet-sibling visibility (paper 117/120)
CREATE VIEW propagation_sibling_visibility AS
SELECT run_id, count(*) FILTER (WHERE visible) AS numerator,
       count(*) FILTER (WHERE visible IS NOT NULL) AS denominator
FROM propagation_probes WHERE reader_relation = 'sibling' GROUP BY run_id;

-- cross-fleet leak: a foreign-fleet reader saw the canary (paper 0/80)
CREATE VIEW propagation_cross_fleet_leak AS
SELECT run_id, count(*) FILTER (WHERE coalesce(leak, visible)) AS numerator,
       count(*) FILTER (WHERE coalesce(leak, visible) IS NOT NULL) AS denominator
FROM propagation_probes WHERE reader_relation = 'foreign' GROUP BY run_id;

-- Fig. 5: visibility by reader relation with counts
CREATE VIEW propagation_visibility_by_relation AS
SELECT run_id, reader_relation, count(*) FILTER (WHERE visible) AS visible,
       count(*) FILTER (WHERE visible IS NOT NULL) AS probes
FROM propagation_probes GROUP BY ALL ORDER BY run_id, reader_relation;

-- window facts that became visible before the poll deadline (paper 8/8)
CREATE VIEW propagation_window_visible AS
SELECT run_id, count(*) FILTER (WHERE visible) AS numerator,
       count(*) FILTER (WHERE visible IS NOT NULL) AS denominator
FROM events WHERE experiment = 'propagation' AND phase = 'window' GROUP BY run_id;

-- window facts seen on the poller's first search after the write: a window of one search
-- round trip (paper 8.3, 9.4: all 8 with poll_count = 1)
CREATE VIEW propagation_window_first_poll AS
SELECT run_id, count(*) FILTER (WHERE visible AND poll_count = 1) AS numerator,
       count(*) FILTER (WHERE visible IS NOT NULL) AS denominator
FROM events WHERE experiment = 'propagation' AND phase = 'window' GROUP BY run_id;

-- window facts that became visible, with their time to visible (Fig. 6 plots these)
CREATE VIEW propagation_window_facts AS
SELECT run_id, fact_id, time_to_visible_ms, poll_count FROM events
WHERE experiment = 'propagation' AND phase = 'window' AND visible
  AND time_to_visible_ms IS NOT NULL;

-- write-to-visible window from the tight-poll phase (paper p50 0.83 / p95 1.63 / max 1.97 s)
CREATE VIEW propagation_window_latency AS
SELECT run_id, count(time_to_visible_ms) AS n,
       quantile_cont(time_to_visible_ms, 0.50) AS p50,
       quantile_cont(time_to_visible_ms, 0.95) AS p95,
       quantile_cont(time_to_visible_ms, 0.99) AS p99, max(time_to_visible_ms) AS max
FROM propagation_window_facts GROUP BY run_id;

-- redistribute: rows whose agent_id flipped to the target, by requester trust x relation
CREATE VIEW propagation_redistribute AS
SELECT run_id, requester_trust, relation,
       count(*) FILTER (WHERE flipped) AS flipped,
       count(*) FILTER (WHERE flipped IS NOT NULL) AS attempts,
       string_agg(DISTINCT CAST(status AS VARCHAR), '/' ORDER BY CAST(status AS VARCHAR))
                                        AS statuses
FROM events WHERE experiment = 'propagation' AND phase = 'redistribute' GROUP BY ALL
ORDER BY run_id, requester_trust, relation DESC;

-- ---------------------------------------------------------------------------------------
-- Contradiction (paper 7.2, 8, 9.2; Table 2 contradiction rows, Fig. 7)
-- ---------------------------------------------------------------------------------------

CREATE VIEW contradiction_writes AS
SELECT * FROM contradiction_events WHERE phase = 'write';

CREATE VIEW contradiction_checks AS
SELECT * FROM contradiction_events WHERE phase = 'check';

-- writes admitted (201) over writes attempted (paper 194/400)
CREATE VIEW contradiction_writes_succeeded AS
SELECT run_id, count(*) FILTER (WHERE admitted) AS numerator,
       count(*) FILTER (WHERE admitted IS NOT NULL) AS denominator
FROM contradiction_writes GROUP BY run_id;

-- writes rejected at admission (paper 206/400, "dominated by exact-content duplicates")
CREATE VIEW contradiction_writes_rejected AS
SELECT run_id, count(*) FILTER (WHERE NOT admitted) AS numerator,
       count(*) FILTER (WHERE admitted IS NOT NULL) AS denominator
FROM contradiction_writes GROUP BY run_id;

-- admission by reject reason x prose diversity x scenario x write index
CREATE VIEW contradiction_admission AS
SELECT run_id, prose_diversity, scenario, write_index,
       coalesce(reject_reason, CASE WHEN admitted THEN 'admitted' ELSE 'unknown' END)
           AS outcome,
       count(*) AS writes
FROM contradiction_writes GROUP BY ALL
-- a fixed row order (GROUP BY alone leaves it to DuckDB's threads; nbval compares outputs)
ORDER BY run_id, prose_diversity, scenario DESC, write_index, outcome;

-- rejected writes that were the second write of their pair (paper 8.4: the rejections "fall
-- roughly evenly across the first and second write of a pair")
CREATE VIEW contradiction_rejected_second_write AS
SELECT run_id, count(*) FILTER (WHERE NOT admitted AND write_index = 1) AS numerator,
       count(*) FILTER (WHERE NOT admitted) AS denominator
FROM contradiction_writes GROUP BY run_id;

-- fact-runs in which both writes were admitted (paper 90/200)
CREATE VIEW contradiction_both_admitted AS
SELECT run_id, count(*) FILTER (WHERE both_admitted) AS numerator,
       count(*) FILTER (WHERE both_admitted IS NOT NULL) AS denominator
FROM contradiction_checks GROUP BY run_id;

-- detection rate over all fact-runs (paper 98/200)
CREATE VIEW contradiction_detection_all AS
SELECT run_id, count(*) FILTER (WHERE detected) AS numerator,
       count(*) FILTER (WHERE detected IS NOT NULL) AS denominator
FROM contradiction_checks GROUP BY run_id;

-- detections in fact-runs that admitted one write only: the other scenario's admitted write
-- superseded it (paper 8.4: 8 such cross-scenario detections of 200 fact-runs)
CREATE VIEW contradiction_cross_scenario AS
SELECT run_id, count(*) FILTER (WHERE detected AND NOT both_admitted) AS numerator,
       count(*) FILTER (WHERE detected IS NOT NULL) AS denominator
FROM contradiction_checks GROUP BY run_id;

-- detection rate over fact-runs where both writes were admitted (paper 90/90)
CREATE VIEW contradiction_detection_both_admitted AS
SELECT run_id, count(*) FILTER (WHERE detected) AS numerator,
       count(*) FILTER (WHERE detected IS NOT NULL) AS denominator
FROM contradiction_checks WHERE both_admitted GROUP BY run_id;

-- stale reads: a fact-run whose active search returned more than one row (paper 0/200)
CREATE VIEW contradiction_stale_read AS
SELECT run_id, count(*) FILTER (WHERE stale) AS numerator,
       count(*) FILTER (WHERE stale IS NOT NULL) AS denominator
FROM events WHERE experiment = 'contradiction' AND phase = 'stale_read' GROUP BY run_id;

-- admitted writes, each marked whether it triggered a contradiction: its row is the newer row
-- of a detected supersession (observed_supersedes_id set on its refetch; EVENTS.md)
CREATE VIEW contradiction_write_latencies AS
WITH triggering AS (
    SELECT DISTINCT run_id, memory_id FROM events
    WHERE experiment = 'contradiction' AND phase = 'refetch'
      AND observed_supersedes_id IS NOT NULL
)
SELECT w.run_id, w.memory_id, w.scenario, w.latency_ms,
       t.memory_id IS NOT NULL AS triggered
FROM contradiction_writes w
LEFT JOIN triggering t ON t.run_id = w.run_id AND t.memory_id = w.memory_id
WHERE w.admitted AND w.latency_ms IS NOT NULL;

-- write latency of admitted writes (paper p50 1840 / p95 4861 / p99 19319 ms over 194)
CREATE VIEW contradiction_write_latency AS
SELECT run_id, count(*) AS n,
       quantile_cont(latency_ms, 0.50) AS p50, quantile_cont(latency_ms, 0.95) AS p95,
       quantile_cont(latency_ms, 0.99) AS p99, max(latency_ms) AS max
FROM contradiction_write_latencies GROUP BY run_id;

-- write latency split by whether the write triggered a contradiction (paper 7.2)
CREATE VIEW contradiction_write_latency_by_trigger AS
SELECT run_id, triggered, count(*) AS n,
       quantile_cont(latency_ms, 0.50) AS p50, quantile_cont(latency_ms, 0.95) AS p95,
       quantile_cont(latency_ms, 0.99) AS p99, max(latency_ms) AS max
FROM contradiction_write_latencies GROUP BY ALL ORDER BY run_id, triggered DESC;

-- ---------------------------------------------------------------------------------------
-- Long form: every Table 2 rate and latency, one row per run x metric, with the manifest's
-- profile beside it. A metric is named after its view; those names key paper_values.yaml
-- and summary.csv.
-- ---------------------------------------------------------------------------------------

CREATE VIEW rate_metrics AS
WITH per_metric AS (
    SELECT 'leakage_probes_executed' AS metric, * FROM leakage_probes_executed
    UNION ALL BY NAME
    SELECT 'leakage_get_exposure' AS metric, * FROM leakage_get_exposure
    UNION ALL BY NAME
    SELECT 'leakage_get_miss' AS metric, * FROM leakage_get_miss
    UNION ALL BY NAME
    SELECT 'leakage_search_leak' AS metric, * FROM leakage_search_leak
    UNION ALL BY NAME
    SELECT 'leakage_search_miss' AS metric, * FROM leakage_search_miss
    UNION ALL BY NAME
    SELECT 'leakage_reprobe_trust1_cross_fleet' AS metric, * FROM leakage_reprobe_trust1_cross_fleet
    UNION ALL BY NAME
    SELECT 'leakage_reprobe_trust2_cross_fleet' AS metric, * FROM leakage_reprobe_trust2_cross_fleet
    UNION ALL BY NAME
    SELECT 'leakage_reprobe_same_fleet' AS metric, * FROM leakage_reprobe_same_fleet
    UNION ALL BY NAME
    SELECT 'leakage_reprobe_leaks' AS metric, * FROM leakage_reprobe_leaks
    UNION ALL BY NAME
    SELECT 'provenance_writes_succeeded' AS metric, * FROM provenance_writes_succeeded
    UNION ALL BY NAME
    SELECT 'provenance_writes_admitted' AS metric, * FROM provenance_writes_admitted
    UNION ALL BY NAME
    SELECT 'provenance_rate_limited' AS metric, * FROM provenance_rate_limited
    UNION ALL BY NAME
    SELECT 'provenance_completeness' AS metric, * FROM provenance_completeness
    UNION ALL BY NAME
    SELECT 'provenance_writer_accuracy' AS metric, * FROM provenance_writer_accuracy
    UNION ALL BY NAME
    SELECT 'provenance_depth_fidelity' AS metric, * FROM provenance_depth_fidelity
    UNION ALL BY NAME
    SELECT 'propagation_writes_succeeded' AS metric, * FROM propagation_writes_succeeded
    UNION ALL BY NAME
    SELECT 'propagation_probes_produced' AS metric, * FROM propagation_probes_produced
    UNION ALL BY NAME
    SELECT 'propagation_sibling_visibility' AS metric, * FROM propagation_sibling_visibility
    UNION ALL BY NAME
    SELECT 'propagation_cross_fleet_leak' AS metric, * FROM propagation_cross_fleet_leak
    UNION ALL BY NAME
    SELECT 'propagation_window_visible' AS metric, * FROM propagation_window_visible
    UNION ALL BY NAME
    SELECT 'contradiction_writes_succeeded' AS metric, * FROM contradiction_writes_succeeded
    UNION ALL BY NAME
    SELECT 'contradiction_writes_rejected' AS metric, * FROM contradiction_writes_rejected
    UNION ALL BY NAME
    SELECT 'contradiction_both_admitted' AS metric, * FROM contradiction_both_admitted
    UNION ALL BY NAME
    SELECT 'contradiction_detection_all' AS metric, * FROM contradiction_detection_all
    UNION ALL BY NAME
    SELECT 'contradiction_detection_both_admitted' AS metric, * FROM contradiction_detection_both_admitted
    UNION ALL BY NAME
    SELECT 'contradiction_stale_read' AS metric, * FROM contradiction_stale_read
)
SELECT r.run_id, r.experiment, r.profile, m.variant_write, m.variant_search, m.metric,
       CAST(m.numerator AS BIGINT) AS numerator, CAST(m.denominator AS BIGINT) AS denominator
FROM per_metric m
JOIN runs r USING (run_id);

CREATE VIEW latency_metrics AS
WITH per_metric AS (
    SELECT 'leakage_access_latency' AS metric, * FROM leakage_access_latency
    UNION ALL BY NAME
    SELECT 'leakage_search_latency' AS metric, * FROM leakage_search_latency
    UNION ALL BY NAME
    SELECT 'provenance_hop_latency' AS metric, * FROM provenance_hop_latency
    UNION ALL BY NAME
    SELECT 'propagation_window_latency' AS metric, * FROM propagation_window_latency
    UNION ALL BY NAME
    SELECT 'contradiction_write_latency' AS metric, * FROM contradiction_write_latency
    UNION ALL BY NAME
    SELECT CASE WHEN triggered THEN 'contradiction_write_latency_triggered'
                ELSE 'contradiction_write_latency_untriggered' END AS metric,
           * EXCLUDE (triggered)
    FROM contradiction_write_latency_by_trigger
)
SELECT r.run_id, r.experiment, r.profile, r.target_kind, l.variant_write, l.variant_search,
       l.metric, l.n, l.p50, l.p95, l.p99, l.max
FROM per_metric l JOIN runs r USING (run_id);

-- ---------------------------------------------------------------------------------------
-- Reviewer view (what matches by construction; analysis/basis.py)
-- ---------------------------------------------------------------------------------------

-- detection by scenario: the sequential pair (second write after the first was answered) and
-- the concurrent pair (both writes in flight together); under the headline workload the
-- concurrent pair repeats the sequential pair's sentences, so its path is exercised only
-- where the prose differs (prose_diversity high)
CREATE VIEW contradiction_detection_by_scenario AS
SELECT run_id, scenario, count(*) FILTER (WHERE detected) AS numerator,
       count(*) FILTER (WHERE detected IS NOT NULL) AS denominator,
       count(*) FILTER (WHERE both_admitted) AS both_admitted
FROM contradiction_checks GROUP BY ALL;
-- Faults (the workloads under injected faults, judged by the history checkers;
-- lib/fleetprobe/experiments/faults.py, lib/fleetprobe/oracle/checkers.py)
-- ---------------------------------------------------------------------------------------

-- faults the nemesis injected, by kind and stage (a restart is the end of a kill, not a fault)
CREATE VIEW faults_injected AS
SELECT run_id, fault_kind, fault_stage, count(*) AS n
FROM events
WHERE experiment = 'faults' AND phase = 'fault' AND fault_kind <> 'restart'
GROUP BY run_id, fault_kind, fault_stage
ORDER BY run_id, fault_kind, fault_stage;

-- server outages: each kill -9 and how long until the server answered health again
CREATE VIEW faults_outages AS
SELECT run_id, fault_id, delay_ms AS down_ms
FROM events
WHERE experiment = 'faults' AND phase = 'fault' AND fault_kind = 'restart'
ORDER BY run_id, fault_id;

-- what the harness retried: logical requests (writes and read-backs), those that needed
-- more than one attempt, the extra attempts, and those that still failed after retries
CREATE VIEW faults_retries AS
SELECT run_id,
       count(*)                                              AS requests,
       count(*) FILTER (WHERE attempts > 1)                  AS retried,
       coalesce(sum(attempts - 1), 0)                        AS extra_attempts,
       count(*) FILTER (WHERE status IS NULL OR status NOT BETWEEN 200 AND 299) AS failed
FROM events
WHERE experiment = 'faults' AND phase IN ('write', 'read')
GROUP BY run_id
ORDER BY run_id;

-- HTTP attempts that ended in a 5xx or a transport error (what failures_accounted judges)
CREATE VIEW faults_failed_attempts AS
SELECT run_id,
       count(*) FILTER (WHERE status >= 500)                 AS answered_5xx,
       count(*) FILTER (WHERE status IS NULL)                AS transport_errors,
       count(*) FILTER (WHERE fault_id IS NOT NULL)          AS injected
FROM events
WHERE experiment = 'faults' AND phase = 'attempt' AND (status IS NULL OR status >= 500)
GROUP BY run_id
ORDER BY run_id;

-- the checkers' verdicts, one row per (run, checker)
CREATE VIEW faults_checks AS
SELECT run_id, checker, ok, checked, violations, examples
FROM events
WHERE experiment = 'faults' AND phase = 'check'
ORDER BY run_id, seq;

-- checkers green over checkers run (expected: all of them on every governed profile)
CREATE VIEW faults_checkers_green AS
SELECT run_id, count(*) FILTER (WHERE ok) AS numerator, count(*) AS denominator
FROM faults_checks
GROUP BY run_id
ORDER BY run_id;
-- separation (storage-level vs prompt-level separation: Vera, Lex, Axis; not in the paper)
-- Judgement events are written by the experiment's checkers; its fields are read as text
-- (EVENTS.md, separation) and cast here.
-- ---------------------------------------------------------------------------------------

CREATE VIEW separation_contamination_events AS
SELECT run_id, agent, account, account_kind, op_kind,
       CAST(top_k AS BIGINT)           AS top_k,
       CAST(n_returned AS BIGINT)      AS n_returned,
       CAST(n_restricted AS BIGINT)    AS n_restricted,
       CAST(n_unpartitioned AS BIGINT) AS n_unpartitioned,
       CAST(contaminated AS BOOLEAN)   AS contaminated
FROM events WHERE experiment = 'separation' AND phase = 'contamination';

-- contamination: Vera's and Lex's answered queries (recall and search) that returned at least
-- one record from a partition outside the agent's authorised set, per top_k
CREATE VIEW separation_contamination AS
SELECT run_id, top_k,
       count(*) FILTER (WHERE contaminated)             AS numerator,
       count(*) FILTER (WHERE contaminated IS NOT NULL) AS denominator
FROM separation_contamination_events GROUP BY ALL;

-- the same per agent and operation
CREATE VIEW separation_contamination_by_agent AS
SELECT run_id, agent, op_kind, top_k,
       count(*) FILTER (WHERE contaminated)             AS numerator,
       count(*) FILTER (WHERE contaminated IS NOT NULL) AS denominator
FROM separation_contamination_events GROUP BY ALL;

-- restricted records among every record returned (records of one answer are not independent:
-- a count, its interval is indicative only)
CREATE VIEW separation_restricted_records AS
SELECT run_id, top_k,
       coalesce(sum(n_restricted), 0) AS numerator,
       coalesce(sum(n_returned), 0)   AS denominator
FROM separation_contamination_events WHERE contaminated IS NOT NULL GROUP BY ALL;

-- absence: Vera's queries on hold-only accounts answered with nothing about the account
-- ("no record in authorized partitions": an empty answer, never "clear across domains")
CREATE VIEW separation_absence AS
SELECT run_id,
       count(*) FILTER (WHERE absence_verdict = 'no record in authorized partitions') AS numerator,
       count(*) FILTER (WHERE absence_verdict IS NOT NULL)                            AS denominator,
       count(*) FILTER (WHERE absence_verdict = 'hold visible')                       AS hold_visible
FROM events WHERE experiment = 'separation' AND phase = 'absence' GROUP BY ALL;

-- Axis's fan-out: conflict accounts on which both parties (deal and hold) came back with the
-- right fleet, from the response fields (blended) or the call labels (per_fleet)
CREATE VIEW separation_attribution AS
SELECT run_id, mode, CAST(top_k AS BIGINT) AS top_k,
       count(*) FILTER (WHERE CAST(both_named AS BOOLEAN))         AS numerator,
       count(*) FILTER (WHERE both_named IS NOT NULL)              AS denominator,
       count(*) FILTER (WHERE CAST(both_named_summary AS BOOLEAN)) AS summary_named,
       coalesce(sum(CAST(misattributed AS BIGINT)), 0)             AS misattributed
FROM events WHERE experiment = 'separation' AND phase = 'attribution' GROUP BY ALL;

-- reserved types: client writes of insight/outcome/rule refused with 422 INVALID_ARGUMENTS
-- whose message names the server-side route
CREATE VIEW separation_reserved AS
SELECT run_id,
       count(*) FILTER (WHERE CAST(refused AS BOOLEAN) AND CAST(envelope_ok AS BOOLEAN)
                        AND CAST(names_route AS BOOLEAN))          AS numerator,
       count(*) FILTER (WHERE refused IS NOT NULL)                 AS denominator,
       count(*) FILTER (WHERE CAST(stored AS BOOLEAN))             AS stored
FROM events WHERE experiment = 'separation' AND phase = 'reserved_check' GROUP BY ALL;

CREATE VIEW separation_insight_access_events AS
SELECT run_id, agent, target, axis, insight_id, memory_id, account, domain,
       CAST(readable AS BOOLEAN) AS readable, CAST(in_org_shared AS BOOLEAN) AS in_org_shared
FROM events WHERE experiment = 'separation' AND phase = 'insight_access';

-- insights: Axis's insights read back by Vera and Lex (by id and by search)
CREATE VIEW separation_insight_read AS
SELECT run_id, agent, axis,
       count(*) FILTER (WHERE readable)             AS numerator,
       count(*) FILTER (WHERE readable IS NOT NULL) AS denominator
FROM separation_insight_access_events WHERE target = 'insight' GROUP BY ALL;

-- underlying records: the other domain's records an insight names, read by id
CREATE VIEW separation_underlying_read AS
SELECT run_id, agent,
       count(*) FILTER (WHERE readable)             AS numerator,
       count(*) FILTER (WHERE readable IS NOT NULL) AS denominator
FROM separation_insight_access_events WHERE target = 'underlying' GROUP BY ALL;

CREATE VIEW separation_insights_generated AS
SELECT run_id, max(status) AS status, coalesce(max(CAST(n_findings AS BIGINT)), 0) AS findings
FROM events WHERE experiment = 'separation' AND phase = 'insight_generate' GROUP BY ALL;

-- graph reach: rows the entity-graph expansion returned outside the caller's partitions
CREATE VIEW separation_graph_restricted AS
SELECT run_id,
       coalesce(sum(CAST(n_graph_restricted AS BIGINT)), 0) AS numerator,
       coalesce(sum(CAST(n_graph AS BIGINT)), 0)            AS denominator,
       count(*) FILTER (WHERE CAST(observable AS BOOLEAN))  AS observable_probes,
       count(*)                                             AS probes
FROM events WHERE experiment = 'separation' AND phase = 'graph_reach' GROUP BY ALL;

-- graph reach: Vera's searches on conflict accounts where the graph surfaced Axis's insight
CREATE VIEW separation_graph_insight AS
SELECT run_id,
       count(*) FILTER (WHERE CAST(insight_reached AS BOOLEAN)) AS numerator,
       count(*) FILTER (WHERE insight_reached IS NOT NULL)      AS denominator
FROM events WHERE experiment = 'separation' AND phase = 'graph_reach'
     AND agent = 'vera' AND account_kind = 'conflict' GROUP BY ALL;

-- every separation rate in long form (summary.csv and the report read this)
CREATE VIEW separation_rate_metrics AS
WITH per_metric AS (
    SELECT 'separation_contamination[top_k=' || top_k || ']' AS metric, run_id, numerator,
           denominator FROM separation_contamination
    UNION ALL
    SELECT 'separation_restricted_records[top_k=' || top_k || ']', run_id, numerator,
           denominator FROM separation_restricted_records
    UNION ALL
    SELECT 'separation_absence', run_id, numerator, denominator FROM separation_absence
    UNION ALL
    SELECT 'separation_attribution[' || mode || '/top_k=' || top_k || ']', run_id, numerator,
           denominator FROM separation_attribution
    UNION ALL
    SELECT 'separation_attribution_summary[' || mode || '/top_k=' || top_k || ']', run_id,
           summary_named, denominator FROM separation_attribution
    UNION ALL
    SELECT 'separation_reserved_refused', run_id, numerator, denominator FROM separation_reserved
    UNION ALL
    SELECT 'separation_insight_read[' || agent || '/' || axis || ']', run_id, numerator,
           denominator FROM separation_insight_read
    UNION ALL
    SELECT 'separation_underlying_read[' || agent || ']', run_id, numerator, denominator
    FROM separation_underlying_read
    UNION ALL
    SELECT 'separation_graph_restricted', run_id, numerator, denominator
    FROM separation_graph_restricted
    UNION ALL
    SELECT 'separation_graph_insight', run_id, numerator, denominator
    FROM separation_graph_insight
)
SELECT r.run_id, r.profile, r.target_kind, m.metric,
       CAST(m.numerator AS BIGINT) AS numerator, CAST(m.denominator AS BIGINT) AS denominator
FROM per_metric m JOIN runs r USING (run_id);
-- Backends (issue 11: LangGraph store, mem0, CrewAI Memory behind the wire adapter; the
-- backends table of lib/fleetprobe/analysis/backends_report.py). One row per run x metric:
-- outcome counts over judged events, and how many events the target answered "not
-- supported by this backend" (`not_applicable`, their judgements are null).
-- ---------------------------------------------------------------------------------------

CREATE VIEW backend_metric_counts AS
WITH ev AS MATERIALIZED (
    -- the four experiments' events, read once for the twelve metrics below
    SELECT run_id, experiment, phase, axis, expected, credential, variant_write,
           variant_search, reader_relation, leak, miss, visible, flipped, complete, accurate,
           detected, stale, not_applicable
    FROM events WHERE experiment IN ('leakage', 'propagation', 'provenance', 'contradiction')
), outcomes AS (
    -- search: the documented variant only (secrets with fleet_id, probes with fleet_ids),
    -- the one every target runs, as in Table 2
    SELECT run_id, 'leakage_search_leak' AS metric, leak AS outcome, not_applicable
    FROM ev WHERE experiment = 'leakage' AND phase = 'probe' AND axis = 'search'
                  AND expected = 'deny' AND coalesce(variant_write, 'fleet_id') = 'fleet_id'
                  AND coalesce(variant_search, 'fleet_ids') = 'fleet_ids'
    UNION ALL
    SELECT run_id, 'leakage_search_miss', miss, not_applicable
    FROM ev WHERE experiment = 'leakage' AND phase = 'probe' AND axis = 'search'
                  AND expected = 'allow' AND coalesce(variant_write, 'fleet_id') = 'fleet_id'
                  AND coalesce(variant_search, 'fleet_ids') = 'fleet_ids'
    UNION ALL
    SELECT run_id, 'leakage_get_exposure', leak, not_applicable
    FROM ev WHERE experiment = 'leakage' AND phase = 'probe' AND axis = 'get'
                  AND expected = 'deny'
    UNION ALL
    SELECT run_id, 'leakage_agent_get_leak', leak, not_applicable
    FROM ev WHERE experiment = 'leakage' AND phase IN ('agent_probe', 'reprobe')
                  AND credential = 'agent' AND expected = 'deny'
    UNION ALL
    SELECT run_id, 'leakage_agent_get_miss', miss, not_applicable
    FROM ev WHERE experiment = 'leakage' AND phase IN ('agent_probe', 'reprobe')
                  AND credential = 'agent' AND expected = 'allow'
    UNION ALL
    SELECT run_id, 'propagation_sibling_visible', visible, not_applicable
    FROM ev WHERE experiment = 'propagation' AND phase = 'probe'
                  AND reader_relation = 'sibling'
    UNION ALL
    SELECT run_id, 'propagation_foreign_leak', leak, not_applicable
    FROM ev WHERE experiment = 'propagation' AND phase = 'probe'
                  AND reader_relation = 'foreign'
    UNION ALL
    SELECT run_id, 'propagation_redistribute_flipped', flipped, not_applicable
    FROM ev WHERE experiment = 'propagation' AND phase = 'redistribute'
    UNION ALL
    SELECT run_id, 'provenance_complete', complete, not_applicable
    FROM ev WHERE experiment = 'provenance' AND phase = 'chain'
    UNION ALL
    SELECT run_id, 'provenance_accurate', accurate, not_applicable
    FROM ev WHERE experiment = 'provenance' AND phase = 'chain'
    UNION ALL
    SELECT run_id, 'contradiction_detected', detected, not_applicable
    FROM ev WHERE experiment = 'contradiction' AND phase = 'check'
    UNION ALL
    SELECT run_id, 'contradiction_stale_read', stale, not_applicable
    FROM ev WHERE experiment = 'contradiction' AND phase = 'stale_read'
)
SELECT run_id, metric,
       count(*) FILTER (WHERE outcome)                    AS numerator,
       count(*) FILTER (WHERE outcome IS NOT NULL)        AS denominator,
       count(*) FILTER (WHERE not_applicable IS NOT NULL) AS not_applicable,
       any_value(not_applicable)                          AS na_reason
FROM outcomes GROUP BY ALL;

-- requests a run's target answered "not supported by this backend", per run and phase
CREATE VIEW backend_not_applicable AS
SELECT run_id, experiment, phase, count(*) AS n, any_value(not_applicable) AS reason
FROM events WHERE not_applicable IS NOT NULL GROUP BY ALL;
-- Governance matrix (beyond the paper: its section 10's adversarial matrix). Verdicts are
-- the checker's judgement of each probe against lib/fleetprobe/oracle/policy.py; paper_* paths are
-- the paper's own probe design (7.1) at scale, judged by the paper's expectation.
-- ---------------------------------------------------------------------------------------

-- is_effect: a side effect a probe had (`<probe_id>+effect`), not a probe of its own
CREATE VIEW matrix_verdicts AS
SELECT v.*, r.profile AS run_profile, r.target_kind AS run_target_kind,
       coalesce(v.probe_id LIKE '%+effect', false) AS is_effect
FROM events v JOIN runs r USING (run_id)
WHERE v.experiment = 'matrix' AND v.phase = 'verdict';

CREATE VIEW matrix_probes AS
SELECT * FROM matrix_events WHERE phase = 'probe';

-- the run each (profile, target kind) is reported by: a run on the headline seed first
-- (headline_seeds: paper_values.yaml headline_params; a run on another seed is a repeat, read
-- by matrix_seed_cells), then complete, then the largest
CREATE VIEW matrix_canonical AS
SELECT run_id, profile, target_kind, started_at FROM (
    SELECT run_id, profile, target_kind, started_at,
           -- the full-size runs (within 10% of the largest) before smaller ones, then the
           -- latest of them: a refit's rerun replaces the run it repeats
           row_number() OVER (PARTITION BY profile, target_kind
                              ORDER BY headline DESC, complete DESC,
                                       n_events >= 0.9 * largest DESC, started_at DESC) AS rank
    FROM (SELECT r.*, coalesce(r.seed = h.seed, true) AS headline,
                 max(r.n_events) OVER (PARTITION BY r.profile, r.target_kind) AS largest
          FROM runs r LEFT JOIN headline_seeds h USING (experiment)
          WHERE r.experiment = 'matrix'))
WHERE rank = 1;

-- heatmap cell: principal x path; n counts judged probes (n/a and errors apart)
CREATE VIEW matrix_cells AS
SELECT run_id, run_profile AS profile, run_target_kind AS target_kind, principal, path,
       count(*) FILTER (WHERE verdict NOT IN ('n/a', 'error')) AS n,
       count(*) FILTER (WHERE verdict = 'gap')                 AS gaps,
       count(*) FILTER (WHERE verdict = 'miss')                AS misses,
       count(*) FILTER (WHERE verdict = 'refused')             AS refused,
       count(*) FILTER (WHERE verdict = 'oracle')              AS oracles,
       count(*) FILTER (WHERE verdict = 'n/a')                 AS na,
       count(*) FILTER (WHERE expected = 'deny' AND verdict NOT IN ('n/a', 'error')) AS denied
FROM matrix_verdicts
WHERE path NOT LIKE 'paper_%' AND NOT is_effect
GROUP BY ALL;

-- gap catalogue: one line per (path, principal, verdict, what) with its first probe as the
-- example the reproduction is written from
CREATE VIEW matrix_gap_catalogue AS
WITH found AS (
    SELECT run_id, run_profile AS profile, path, principal, verdict, what,
           count(*) AS count, arg_min(probe_id, seq) AS example_probe,
           string_agg(DISTINCT visibility, ',' ORDER BY visibility) AS visibilities
    FROM matrix_verdicts
    WHERE verdict IN ('gap', 'miss') AND path NOT LIKE 'paper_%'
    GROUP BY ALL
)
SELECT f.*, p.op, p.status AS example_status, p.error AS example_error, p.who, p.row_key,
       p.variant, p.target AS target_agent, p.fleets, p.got
FROM found f
LEFT JOIN matrix_probes p ON p.run_id = f.run_id AND p.probe_id = f.example_probe;

-- paths the target has no endpoint for, in its own words (a backend adapter's answer to the
-- path itself first, else why its probes were not sent: docs/backends.md)
CREATE VIEW matrix_not_applicable AS
SELECT run_id, run_profile AS profile, path,
       coalesce(min(what) FILTER (WHERE what NOT LIKE 'its row was not built%'
                                    AND what NOT LIKE 'no % to replay%'
                                    AND what NOT LIKE 'no entity linked%'), min(what)) AS reason,
       count(*) AS probes
FROM matrix_verdicts WHERE verdict = 'n/a' GROUP BY ALL;

-- n/a by reason (the checker's `what`: the target's words, or why the probe was not sent)
CREATE VIEW matrix_na_reasons AS
SELECT run_id, run_profile AS profile, what AS reason, count(*) AS probes,
       string_agg(DISTINCT path, ', ' ORDER BY path) AS paths,
       arg_min(probe_id, seq) AS example_probe
FROM matrix_verdicts WHERE verdict = 'n/a' GROUP BY ALL;

-- existence oracles (a denied probe whose answer tells "exists" from "does not exist") and
-- side effects (a probe that registered, re-homed or re-trusted a principal): one line per
-- (path, what) with a count and the first probe as example
CREATE VIEW matrix_oracles AS
SELECT run_id, run_profile AS profile, path, what, count(*) AS count,
       arg_min(probe_id, seq) AS example_probe
FROM matrix_verdicts WHERE verdict = 'oracle' GROUP BY ALL;

CREATE VIEW matrix_side_effects AS
SELECT run_id, run_profile AS profile, path, what, count(*) AS count,
       arg_min(probe_id, seq) AS example_probe
FROM matrix_verdicts WHERE verdict = 'side_effect' GROUP BY ALL;

-- the entity census: per run, the entities read back (tenant x fleet), how many answered,
-- the rows their linked_memories list, and the manifest's `entity links` skip (rows written
-- with a link the target did not keep; their entity probes are n/a)
CREATE VIEW matrix_entity_census AS
WITH census AS (
    SELECT run_id, count(*) AS entities,
           count(*) FILTER (WHERE status BETWEEN 200 AND 299) AS entities_read,
           sum(CASE WHEN coalesce(linked, '') = '' THEN 0
                    ELSE len(string_split(linked, ' ')) END) AS linked_rows
    FROM events WHERE experiment = 'matrix' AND phase = 'census_entity' GROUP BY run_id
), skips AS (
    SELECT run_id, string_agg(s ->> 'reason', '; ') AS entity_links_skipped
    FROM (SELECT run_id, unnest(from_json(coalesce(skipped, '[]'), '["JSON"]')) AS s
          FROM manifests WHERE experiment = 'matrix')
    WHERE s ->> 'probe' = 'entity links' GROUP BY run_id
)
-- (runs recorded before the census have no line)
SELECT r.run_id, r.profile, c.entities, c.entities_read,
       CAST(coalesce(c.linked_rows, 0) AS BIGINT) AS linked_rows, k.entity_links_skipped
FROM census c JOIN runs r USING (run_id) LEFT JOIN skips k USING (run_id);

-- cross-tenant probes and how many of them succeeded (returned, revealed or changed)
CREATE VIEW matrix_cross_tenant AS
SELECT run_id, run_profile AS profile, path,
       count(*) FILTER (WHERE verdict NOT IN ('n/a', 'error')) AS probes,
       count(*) FILTER (WHERE verdict = 'gap')                 AS successes
FROM matrix_verdicts WHERE cross_tenant GROUP BY ALL;

-- paper 9.1: cross-tenant GET-by-id and search probes that reached another tenant's row
-- (the paper: "cross-tenant requests are rejected on both paths")
CREATE VIEW matrix_cross_tenant_read AS
SELECT run_id, count(*) FILTER (WHERE verdict = 'gap') AS numerator, count(*) AS denominator
FROM matrix_verdicts
WHERE cross_tenant AND NOT is_effect AND (path = 'get' OR path LIKE 'search%')
  AND verdict NOT IN ('n/a', 'error')
GROUP BY run_id;

-- paper 9.3: same-tenant redistributes that moved the row (gap on a denied one, ok on an
-- allowed one), by requester trust below 3 and at 3
CREATE VIEW matrix_redistribute_by_trust AS
SELECT run_id, trust >= 3 AS at_trust3,
       count(*) FILTER (WHERE (expected = 'deny' AND verdict = 'gap')
                           OR (expected = 'allow' AND verdict = 'ok')) AS numerator,
       count(*) AS denominator
FROM matrix_verdicts
WHERE path LIKE 'redistribute%' AND NOT cross_tenant AND NOT is_effect AND trust IS NOT NULL
  AND verdict IN ('ok', 'gap', 'refused')
GROUP BY ALL;

CREATE VIEW matrix_redistribute_below_trust3 AS
SELECT run_id, numerator, denominator FROM matrix_redistribute_by_trust WHERE NOT at_trust3;

CREATE VIEW matrix_redistribute_trust3 AS
SELECT run_id, numerator, denominator FROM matrix_redistribute_by_trust WHERE at_trust3;

-- the paper's two rates (and their miss companions) at N = 2 F^2 K
CREATE VIEW matrix_paper_rates AS
SELECT run_id, run_profile AS profile,
       CASE path WHEN 'paper_get' THEN 'get' ELSE 'search' END AS axis,
       CASE path WHEN 'paper_get' THEN 'tenant-key GET exposure (expected deny)'
            ELSE 'search leak rate (expected deny)' END AS metric,
       count(*) FILTER (WHERE verdict = 'gap')                          AS numerator,
       count(*) FILTER (WHERE expected = 'deny' AND verdict <> 'error') AS denominator
FROM matrix_verdicts WHERE path LIKE 'paper_%' GROUP BY ALL
UNION ALL
SELECT run_id, run_profile,
       CASE path WHEN 'paper_get' THEN 'get' ELSE 'search' END,
       CASE path WHEN 'paper_get' THEN 'tenant-key GET miss (expected allow)'
            ELSE 'search miss rate (expected allow)' END,
       count(*) FILTER (WHERE verdict = 'miss'),
       count(*) FILTER (WHERE expected = 'allow' AND verdict <> 'error')
FROM matrix_verdicts WHERE path LIKE 'paper_%' GROUP BY ALL;

-- principals whose trust or home fleet changed while the probes ran (a side effect)
CREATE VIEW matrix_agent_drift AS
SELECT b.run_id, b.who, b.trust AS trust_before, a.trust AS trust_after,
       b.home AS home_before, a.home AS home_after
FROM events b
JOIN events a ON a.run_id = b.run_id AND a.who = b.who AND a.phase = 'census_agent'
             AND a.step = 'after'
WHERE b.experiment = 'matrix' AND b.phase = 'census_agent' AND b.step = 'before'
  AND b.credential = 'agent'
  AND (a.trust IS DISTINCT FROM b.trust OR a.home IS DISTINCT FROM b.home);

-- one line per run
-- one line per run (probes: verdicts of probes, side effects not counted)
CREATE VIEW matrix_summary AS
SELECT r.run_id, r.profile, r.target_kind, r.complete, r.incomplete_reason,
       nullif(array_to_string(from_json(coalesce(any_value(m.shortfalls), '[]'), '["VARCHAR"]'),
                              '; '), '')                                         AS shortfalls,
       count(*) FILTER (WHERE v.path NOT LIKE 'paper_%' AND NOT v.is_effect)     AS probes,
       count(*) FILTER (WHERE v.probe_id LIKE 'r%' AND NOT v.is_effect)          AS random_probes,
       count(*) FILTER (WHERE v.verdict = 'gap' AND v.path NOT LIKE 'paper_%')   AS gaps,
       count(*) FILTER (WHERE v.verdict = 'miss' AND v.path NOT LIKE 'paper_%')  AS misses,
       count(*) FILTER (WHERE v.verdict = 'oracle')                              AS oracles,
       count(*) FILTER (WHERE v.verdict = 'side_effect')                         AS side_effects,
       count(*) FILTER (WHERE v.verdict = 'refused')                             AS refused,
       count(*) FILTER (WHERE v.verdict = 'n/a')                                 AS not_applicable,
       count(*) FILTER (WHERE v.verdict = 'error')                               AS errors,
       count(*) FILTER (WHERE v.cross_tenant AND v.verdict NOT IN ('n/a', 'error'))
                                                                                 AS cross_tenant_probes,
       count(*) FILTER (WHERE v.cross_tenant AND v.verdict = 'gap')              AS cross_tenant_successes,
       (SELECT count(*) FROM matrix_agent_drift d WHERE d.run_id = r.run_id)    AS agents_drifted
FROM runs r JOIN matrix_verdicts v USING (run_id) LEFT JOIN manifests m USING (run_id)
GROUP BY ALL;

-- Between-seed spread (issue 36): each complete matrix run with its seed and its world (its
-- params but the seed and how the run was made: target, traces_root, progress, client), the
-- latest run per (target, world, seed); `seeds`: the target's seeds in that world;
-- `kit_commit`: the kit's commit it was made from (runs of other commits may differ by code)
CREATE VIEW matrix_seed_runs AS
WITH worlds AS (
    SELECT run_id, profile, target_kind, seed, started_at,
           (SELECT left(m.kit_commit, 7) FROM manifests m WHERE m.run_id = r.run_id)
                                                                      AS kit_commit,
           CAST(to_json(map_from_entries(list_sort(list_filter(
               map_entries(CAST(CAST(params AS JSON) AS MAP(VARCHAR, JSON))),
               lambda e: e.key NOT IN ('seed', 'target', 'traces_root', 'progress',
                                       'client'))))) AS VARCHAR) AS world
    FROM runs r
    WHERE experiment = 'matrix' AND complete AND params IS NOT NULL AND seed IS NOT NULL
), latest AS (
    SELECT *, row_number() OVER (PARTITION BY profile, target_kind, world, seed
                                 ORDER BY started_at DESC, run_id DESC) AS rank
    FROM worlds
)
SELECT run_id, profile, target_kind, world, seed, kit_commit,
       count(*) OVER (PARTITION BY profile, target_kind, world) AS seeds
FROM latest WHERE rank = 1;

-- per run of matrix_seed_runs, principal and path: judged probes (n/a and errors apart),
-- gaps, misses and the judged probes the policy denies, as matrix_cells counts them; the
-- paper's probe design (paper_get, paper_search) is in as paths of their own
CREATE VIEW matrix_seed_cells AS
SELECT s.profile, s.target_kind, s.world, s.seed, s.seeds, s.kit_commit, s.run_id,
       v.principal, v.path,
       count(*) FILTER (WHERE v.verdict NOT IN ('n/a', 'error')) AS n,
       count(*) FILTER (WHERE v.verdict = 'gap')                 AS gaps,
       count(*) FILTER (WHERE v.verdict = 'miss')                AS misses,
       count(*) FILTER (WHERE v.expected = 'deny' AND v.verdict NOT IN ('n/a', 'error'))
                                                                 AS denied
FROM matrix_seed_runs s JOIN matrix_verdicts v USING (run_id)
WHERE NOT v.is_effect
GROUP BY ALL;

-- per run of matrix_seed_runs, on its seed and world (the `hardened` profile's zero on seeds
-- and worlds it was not built on): the matrix's judged probes, gaps and misses, and apart the
-- paper's probe design (7.1): its search leak and tenant-key GET exposure, k of the probes
-- the paper expects denied (as matrix_paper_rates)
CREATE VIEW matrix_seed_totals AS
SELECT profile, target_kind, world, seed, kit_commit, run_id,
       CAST(coalesce(sum(n) FILTER (WHERE NOT paper), 0) AS BIGINT)                AS judged,
       CAST(coalesce(sum(gaps) FILTER (WHERE NOT paper), 0) AS BIGINT)             AS gaps,
       CAST(coalesce(sum(misses) FILTER (WHERE NOT paper), 0) AS BIGINT)           AS misses,
       string_agg(DISTINCT path, ', ' ORDER BY path) FILTER (WHERE gaps > 0 AND NOT paper)
                                                                                   AS gap_paths,
       CAST(coalesce(sum(gaps) FILTER (WHERE path = 'paper_search'), 0) AS BIGINT) AS search_leaks,
       CAST(coalesce(sum(denied) FILTER (WHERE path = 'paper_search'), 0) AS BIGINT)
                                                                                   AS search_denied,
       CAST(coalesce(sum(gaps) FILTER (WHERE path = 'paper_get'), 0) AS BIGINT)    AS get_exposed,
       CAST(coalesce(sum(denied) FILTER (WHERE path = 'paper_get'), 0) AS BIGINT)  AS get_denied
FROM (SELECT *, path LIKE 'paper_%' AS paper FROM matrix_seed_cells) GROUP BY ALL;

-- Backends x governance matrix (issue 11): per matrix run, judged probes and their gaps and
-- misses, and the probes not applicable (a path or world-building step the backend lacks), for
-- the backends table; per run and path for tables/backends_matrix (backends_report.py).
-- ---------------------------------------------------------------------------------------

CREATE VIEW backend_matrix_counts AS
WITH v AS (SELECT * FROM matrix_verdicts WHERE path NOT LIKE 'paper_%' AND NOT is_effect)
SELECT run_id, 'matrix_gap' AS metric,
       count(*) FILTER (WHERE verdict = 'gap')                  AS numerator,
       count(*) FILTER (WHERE verdict NOT IN ('n/a', 'error'))  AS denominator,
       count(*) FILTER (WHERE verdict = 'n/a')                  AS not_applicable,
       CASE WHEN count(*) FILTER (WHERE verdict = 'n/a') > 0
            THEN 'paths or world-building steps the target lacks (tables/backends_matrix.md)'
       END                                                      AS na_reason
FROM v GROUP BY run_id
UNION ALL
SELECT run_id, 'matrix_miss',
       count(*) FILTER (WHERE verdict = 'miss'),
       count(*) FILTER (WHERE verdict NOT IN ('n/a', 'error')),
       count(*) FILTER (WHERE verdict = 'n/a'),
       CASE WHEN count(*) FILTER (WHERE verdict = 'n/a') > 0
            THEN 'paths or world-building steps the target lacks (tables/backends_matrix.md)'
       END
FROM v GROUP BY run_id;

-- Every judged matrix probe with what attribution needs (sections/backends.py classifies
-- each gap by a rule over these fields): the verdict, the fleets the request named, whether
-- it returned the row, the row's observed fleet (census) and the prober's home fleet.
CREATE VIEW backend_matrix_attribution AS
WITH probes AS (
    SELECT v.run_id, v.probe_id, v.path, v.principal, v.visibility, v.expected, v.verdict,
           coalesce(v.cross_tenant, false) AS cross_tenant, p.fleets, p.returned,
           c.fleet AS row_fleet, a.home,
           list_filter(string_split(coalesce(p.fleets, ''), ','), lambda f: f <> '') AS named
    FROM events v
    JOIN events p ON p.run_id = v.run_id AND p.phase = 'probe' AND p.probe_id = v.probe_id
    LEFT JOIN (SELECT DISTINCT run_id, row_key, fleet FROM events WHERE phase = 'census_row') c
           ON c.run_id = v.run_id AND c.row_key = p.row_key
    LEFT JOIN (SELECT DISTINCT run_id, who, home FROM events
               WHERE phase = 'census_agent' AND step = 'before') a
           ON a.run_id = v.run_id AND a.who = p.who
    WHERE v.experiment = 'matrix' AND v.phase = 'verdict' AND v.verdict NOT IN ('n/a', 'error')),
scoped AS (
    SELECT *, CASE WHEN len(named) > 0 THEN named
                   WHEN coalesce(home, '') <> '' THEN [home] ELSE []::VARCHAR[] END AS scope
    FROM probes)
SELECT * EXCLUDE (scope),
       -- the row's fleet is not one the request named (else the caller's home fleet, its
       -- default scope) but extends one as a string (`fleet-10` for `fleet-1`): what a prefix
       -- match across a boundary returns
       coalesce(row_fleet, '') <> '' AND NOT list_contains(scope, row_fleet)
           AND len(list_filter(scope, lambda f: starts_with(row_fleet, f))) > 0
           AS prefix_sibling
FROM scoped
ORDER BY run_id, probe_id;

-- each gap of a matrix run with its cause: the first rule that holds (so each run's causes sum
-- to its gap count) over what the trace recorded (backend_matrix_attribution): the fleets the
-- request named, the row's observed fleet and visibility, who asked and its home fleet.
-- cause_rank orders the causes as the report lists them
CREATE VIEW backend_gap_classes AS
WITH gaps AS (
    SELECT *, starts_with(path, 'search') OR starts_with(path, 'list')
                  OR starts_with(path, 'recall') AS is_read
    FROM backend_matrix_attribution WHERE verdict = 'gap'),
ranked AS (
    SELECT run_id, probe_id, path, principal, CASE
        WHEN cross_tenant THEN 1
        WHEN path IN ('get', 'patch', 'patch_content', 'delete') THEN 2
        WHEN is_read AND prefix_sibling THEN 3
        WHEN is_read AND len(named) > 0 AND coalesce(list_contains(named, row_fleet), false)
             THEN CASE WHEN visibility = 'scope_agent' THEN 4 ELSE 5 END
        WHEN is_read AND len(named) > 0 THEN 9
        WHEN is_read AND (starts_with(coalesce(principal, ''), 'tenant key')
                          OR ends_with(path, 'singular')) THEN 6
        WHEN is_read THEN CASE WHEN visibility = 'scope_agent' THEN 7 ELSE 8 END
        WHEN path = 'write' THEN 10
        WHEN path = 'after_redistribute' THEN 11
        ELSE 12 END AS cause_rank
    FROM gaps)
SELECT run_id, probe_id, path, principal, cause_rank, [
    'cross-tenant: another tenant''s row',
    'by id: read or change without the caller''s scope',
    'prefix sibling: the row''s fleet extends a fleet the request named',
    'agent-scoped row in a fleet the request named',
    'fleet named by the request (no trust ladder)',
    'default tenant-wide scope (no fleet named, tenant key or singular field)',
    'agent-scoped row in the caller''s default scope',
    'default scope',
    'read outside the fleets the request named',
    'write into a fleet the request named (no write gate)',
    'read after a redistribute the backend does not have (the row never moved)',
    'other'][cause_rank] AS cause
FROM ranked
ORDER BY run_id, probe_id;

CREATE VIEW backend_gap_class_counts AS
SELECT c.run_id, r.profile, c.cause_rank, c.cause, count(*) AS gaps
FROM backend_gap_classes c JOIN runs r USING (run_id)
GROUP BY ALL ORDER BY c.run_id, c.cause_rank;

CREATE VIEW backend_matrix_paths AS
SELECT run_id, run_profile AS profile, path,
       count(*) FILTER (WHERE verdict NOT IN ('n/a', 'error')) AS judged,
       count(*) FILTER (WHERE verdict = 'gap')                 AS gaps,
       count(*) FILTER (WHERE verdict = 'miss')                AS misses,
       count(*) FILTER (WHERE verdict = 'n/a')                 AS not_applicable,
       count(*) FILTER (WHERE verdict = 'error')               AS errors,
       -- the path's own answer first, else why its probes were not sent
       coalesce(min(what) FILTER (WHERE verdict = 'n/a' AND what LIKE 'not supported%'),
                min(what) FILTER (WHERE verdict = 'n/a'))      AS na_reason
FROM matrix_verdicts WHERE path NOT LIKE 'paper_%' AND NOT is_effect GROUP BY ALL;

-- ---------------------------------------------------------------------------------------
-- Dynamics (governance over time; not in the paper). Verdicts are the checker's judgement of
-- each probe by the timed policy (lib/fleetprobe/oracle/policy.py, Timeline: the policy at the
-- moment the server answered); `when` places an answer before, during (sent before the
-- change's acknowledgement, answered after) or after the change; `since_change_ms` is its
-- answer time minus the acknowledgement. Changes that forget a row: soft_delete*, expire.
-- ---------------------------------------------------------------------------------------

CREATE VIEW dynamics_verdicts AS
SELECT v.* REPLACE (coalesce(TRY_CAST(v.inflight AS BOOLEAN), false) AS inflight),
       r.profile AS run_profile, r.target_kind AS run_target_kind,
       v.change IN ('soft_delete', 'soft_delete_single', 'soft_delete_derived', 'expire')
           AS forgets,
       v.change IN ('supersede_rdf', 'supersede_semantic', 'valid_end') AS stales
FROM events v JOIN runs r USING (run_id)
WHERE v.experiment = 'dynamics' AND v.phase = 'verdict';

-- the run each (profile, target kind) is reported by: complete first, then the largest
CREATE VIEW dynamics_canonical AS
SELECT run_id, profile, target_kind, started_at FROM (
    SELECT run_id, profile, target_kind, started_at,
           row_number() OVER (PARTITION BY profile, target_kind
                              ORDER BY complete DESC, n_events DESC, started_at DESC) AS rank
    FROM runs WHERE experiment = 'dynamics')
WHERE rank = 1;

-- one series = one (prober, credential, path, row) probed across one change. Answers after
-- the change's acknowledgement that the policy denies: how many still returned (stale), and
-- when the first denial came (NULL: never denied while probed; the series is censored)
CREATE VIEW dynamics_series AS
SELECT run_id, run_profile AS profile, change_id, change, who, credential, path, family,
       row_key,
       count(*) FILTER (WHERE "when" = 'after' AND expected = 'deny')            AS denied_after,
       count(*) FILTER (WHERE "when" = 'after' AND verdict = 'leak')             AS stale,
       min(since_change_ms) FILTER (WHERE "when" = 'after' AND expected = 'deny'
                                    AND verdict = 'ok')                          AS first_denial_ms,
       max(since_change_ms) FILTER (WHERE "when" = 'after' AND verdict = 'leak') AS last_stale_ms,
       arg_min(probe_id, since_change_ms) FILTER (WHERE "when" = 'after' AND verdict = 'leak')
                                                                                 AS example_probe
FROM dynamics_verdicts WHERE path <> 'bulk_inflight' AND verdict NOT IN ('n/a', 'error')
      AND NOT inflight
GROUP BY ALL;

-- stale-access window per change x path: over the series the policy denies after the change,
-- the time from the acknowledgement to the first denial (p50, p99, max over the series that
-- were denied), the series never denied while probed, and the answers after the change the
-- policy denies that still returned the row (or wrote)
CREATE VIEW dynamics_windows AS
SELECT run_id, profile, change, path,
       count(*)                                                  AS series,
       count(*) FILTER (WHERE first_denial_ms IS NULL)           AS never_denied,
       sum(denied_after)                                         AS denied_answers,
       sum(stale)                                                AS stale_answers,
       quantile_cont(first_denial_ms, 0.5)                       AS p50_ms,
       quantile_cont(first_denial_ms, 0.99)                      AS p99_ms,
       max(first_denial_ms)                                      AS max_ms,
       max(last_stale_ms)                                        AS last_stale_ms,
       min(example_probe)                                        AS example_probe
FROM dynamics_series WHERE denied_after > 0
GROUP BY ALL ORDER BY run_id, change, path;

-- forget failures: answers after a row was soft-deleted or expired that returned it (or a
-- derived artefact naming it: entity links, duplicate answers, replays), over the answers
-- the policy denies on those changes; one line per run, path
CREATE VIEW dynamics_forget_failures AS
SELECT run_id, run_profile AS profile, change, path,
       count(*) FILTER (WHERE forget)                            AS numerator,
       count(*) FILTER (WHERE expected = 'deny')                 AS denominator,
       arg_min(probe_id, seq) FILTER (WHERE forget)              AS example_probe
FROM dynamics_verdicts
WHERE forgets AND "when" = 'after' AND verdict NOT IN ('n/a', 'error')
GROUP BY ALL ORDER BY run_id, change, path;

-- in-flight effects: rows a bulk started before an agent deletion or key revocation wrote
-- after the change was acknowledged (server created_at), with what the bulk answered
CREATE VIEW dynamics_inflight AS
SELECT v.run_id, v.run_profile AS profile, v.change, i.planned_items, i.created, i.written,
       i.written_count, coalesce(v.n_after, 0) AS written_after, v.since_change_ms AS last_after_ms,
       i.status AS bulk_status, v.verdict, v.what
FROM dynamics_verdicts v
JOIN events i ON i.run_id = v.run_id AND i.phase = 'inflight' AND i.change_id = v.change_id
WHERE v.path = 'bulk_inflight' ORDER BY v.run_id, v.change;

-- identity reuse: what an agent re-created under a deleted agent's id reads of the rows its
-- predecessor owned (answers after the re-creation that the policy denies, and those returned)
CREATE VIEW dynamics_identity_reuse AS
SELECT run_id, run_profile AS profile, path,
       count(*) FILTER (WHERE verdict = 'leak')                  AS numerator,
       count(*) FILTER (WHERE expected = 'deny')                 AS denominator,
       arg_min(probe_id, seq) FILTER (WHERE verdict = 'leak')    AS example_probe
FROM dynamics_verdicts
WHERE change = 'recreate_agent' AND "when" = 'after' AND verdict NOT IN ('n/a', 'error')
GROUP BY ALL ORDER BY run_id, path;

-- the parts of MGS (in the manner of GateMem), one line per run: miss = reads the policy
-- allows that a must-return path withheld, over allowed reads; leak = answers the policy
-- denies that returned (revealed, wrote), over denied answers (in-flight bulks count one
-- each); forget = forget failures over denied answers on forgotten rows.
-- MGS = (1 - miss)(1 - leak)(1 - forget), computed in Python with the parts' intervals.
CREATE VIEW dynamics_mgs_parts AS
SELECT run_id, run_profile AS profile,
       count(*) FILTER (WHERE verdict = 'miss')                                  AS miss_k,
       count(*) FILTER (WHERE expected = 'allow' AND family NOT IN ('write', 'in flight')
                        AND verdict NOT IN ('n/a', 'error'))                     AS miss_n,
       count(*) FILTER (WHERE verdict = 'leak')                                  AS leak_k,
       count(*) FILTER (WHERE expected = 'deny' AND verdict NOT IN ('n/a', 'error'))
                                                                                 AS leak_n,
       count(*) FILTER (WHERE forget AND forgets AND "when" = 'after')           AS forget_k,
       count(*) FILTER (WHERE forgets AND "when" = 'after' AND expected = 'deny'
                        AND verdict NOT IN ('n/a', 'error'))                     AS forget_n,
       count(*) FILTER (WHERE verdict = 'n/a')                                   AS not_applicable,
       count(*) FILTER (WHERE verdict = 'error')                                 AS errors
FROM dynamics_verdicts GROUP BY ALL;

-- stale answers: after a row was superseded (RDF or semantic) or passed its ts_valid_end,
-- the answers of paths that promise to hide such rows (search, recall, a recall summary)
-- that still served it. One series = one prober's path across one change, over the answers
-- given after the change's acknowledgement (the later write's 201, or ts_valid_end), sent
-- before it or not (a stale answer is no leak: no world to choose between); the window is
-- the time from the acknowledgement to the first answer without the row (NULL: served stale as long as probed), beside when the
-- target itself marked the row (its detector; NULL: never within watched_s)
CREATE VIEW dynamics_stale AS
WITH series AS (
    SELECT run_id, run_profile AS profile, change_id, change, who, path, row_key,
           count(*) FILTER (WHERE since_change_ms >= 0)                      AS answers_after,
           count(*) FILTER (WHERE since_change_ms >= 0 AND verdict = 'stale') AS stale,
           min(since_change_ms) FILTER (WHERE since_change_ms >= 0 AND NOT returned)
                                                                             AS first_current_ms,
           arg_min(probe_id, since_change_ms) FILTER (WHERE since_change_ms >= 0
                                                      AND verdict = 'stale') AS example_probe
    FROM dynamics_verdicts
    WHERE stales AND NOT inflight AND path IN ('search', 'recall', 'recall_summary')
          AND verdict NOT IN ('n/a', 'error')
    GROUP BY ALL),
observed AS (
    SELECT run_id, change_id, TRY_CAST(detected AS BOOLEAN) AS detected,
           TRY_CAST(detected_ms AS DOUBLE) AS detected_ms,
           TRY_CAST(watched_s AS DOUBLE) AS watched_s
    FROM events WHERE experiment = 'dynamics' AND phase = 'change_observed')
SELECT s.run_id, s.profile, s.change, s.path,
       count(*)                                                  AS series,
       count(*) FILTER (WHERE s.first_current_ms IS NULL)        AS never_current,
       sum(s.answers_after)                                      AS answers_after,
       sum(s.stale)                                              AS stale_answers,
       quantile_cont(s.first_current_ms, 0.5)                    AS p50_ms,
       quantile_cont(s.first_current_ms, 0.99)                   AS p99_ms,
       max(s.first_current_ms)                                   AS max_ms,
       any_value(o.detected)                                     AS target_marked,
       any_value(o.detected_ms)                                  AS marked_ms,
       min(s.example_probe)                                      AS example_probe
FROM series s LEFT JOIN observed o USING (run_id, change_id)
GROUP BY ALL ORDER BY s.run_id, s.change, s.path;

-- reads in flight across a change: a search or recall sent just before the change was
-- requested; `during` = answered after its acknowledgement. returned_after_denied: such reads
-- that returned the row although the world after the change denies it (served under the old
-- grant or from before the deletion), beside those the policy judges a leak either way
CREATE VIEW dynamics_inflight_reads AS
SELECT run_id, run_profile AS profile, change, path,
       count(*)                                                           AS reads,
       count(*) FILTER (WHERE "when" = 'during')                          AS straddled,
       count(*) FILTER (WHERE "when" = 'during' AND returned)             AS returned_during,
       count(*) FILTER (WHERE "when" = 'during' AND returned AND expected_late = 'deny')
                                                                          AS returned_after_denied,
       count(*) FILTER (WHERE verdict = 'leak')                           AS leaks
FROM dynamics_verdicts WHERE inflight AND verdict NOT IN ('n/a', 'error')
GROUP BY ALL ORDER BY run_id, change, path;

-- the timeline figure: every judged answer with its time since its change, whether the row
-- came back (or the write landed) and whether the timed policy allowed it
CREATE VIEW dynamics_timeline AS
SELECT run_id, run_profile AS profile, change_id, change, family, path, who, row_key,
       since_change_ms, "when", expected, verdict, returned
FROM dynamics_verdicts WHERE verdict NOT IN ('n/a', 'error') AND path <> 'bulk_inflight';

-- ---------------------------------------------------------------------------------------
-- Backends judged by their own promise (issue 37). Each gap of a backend's matrix run gets a
-- cause (the rules of sections/backends/attribution.py's classify_gap, in SQL) and then a
-- verdict from `backend_promise_rules` (backend_promises_catalogue.yaml's verdict_rules,
-- loaded by base/db.py): the first rule, in file order, whose non-null fields all match.
-- breaks_promise = a bug against the backend's own documented scoping; lacks_feature = a
-- MemClaw feature the backend never claims; adapter_mapping = a consequence of how the
-- adapter maps tenants, default scopes and agent rows; unclassified = no rule matched.
-- ---------------------------------------------------------------------------------------

CREATE VIEW backend_promise_verdicts AS
WITH gaps AS (
    SELECT a.*, r.profile AS label,
           regexp_extract(r.profile, '^backend-([a-z0-9]+)', 1) AS backend,
           -- `backend-<name>` runs from before deployments are idiomatic
           coalesce(nullif(regexp_extract(r.profile, '\[(idiomatic|strict)[,\]]', 1), ''),
                    'idiomatic') AS deployment
    FROM backend_matrix_attribution a JOIN runs r USING (run_id)
    WHERE a.verdict = 'gap' AND r.profile LIKE 'backend-%'
), caused AS (
    -- the cause is backend_gap_classes' (one classification of a gap), as a key the
    -- promise rules name; `sibling` on any path, as a prefix match returns it
    SELECT g.*, g.prefix_sibling AS sibling,
           ['cross_tenant', 'by_id', 'prefix_sibling', 'agent_row_named', 'named_fleet',
            'default_tenant_wide', 'agent_row_default', 'default_scope', 'outside_named',
            'write', 'after_redistribute', 'other'][c.cause_rank] AS cause
    FROM gaps g JOIN backend_gap_classes c USING (run_id, probe_id)
), first_rule AS (
    SELECT c.run_id, c.probe_id, min(r.rule) AS rule
    FROM caused c JOIN backend_promise_rules r
      ON (r.backend IS NULL OR r.backend = c.backend)
     AND (r.deployment IS NULL OR r.deployment = c.deployment)
     AND regexp_full_match(c.cause, r.cause)
     AND (r.path IS NULL OR regexp_full_match(c.path, r.path))
     AND (r.visibility IS NULL OR regexp_full_match(coalesce(c.visibility, ''), r.visibility))
     AND (r.principal IS NULL OR regexp_full_match(coalesce(c.principal, ''), r.principal))
     AND (r.sibling IS NULL OR TRY_CAST(r.sibling AS BOOLEAN) = c.sibling)
    GROUP BY ALL
)
SELECT c.run_id, c.probe_id, c.label, c.backend, c.deployment, c.path, c.principal,
       c.visibility, c.cross_tenant, c.fleets, c.row_fleet, c.home, c.sibling, c.cause,
       coalesce(r.verdict, 'unclassified') AS promise_verdict, r.basis, r.rule
FROM caused c
LEFT JOIN first_rule f ON f.run_id = c.run_id AND f.probe_id = c.probe_id
LEFT JOIN backend_promise_rules r ON r.rule = f.rule
ORDER BY c.run_id, c.probe_id;

-- per backend run, verdict and basis: the gaps, and how many of them crossed tenants
CREATE VIEW backend_promise_verdict_counts AS
SELECT run_id, label, backend, deployment, promise_verdict, basis,
       count(*)                                 AS gaps,
       count(*) FILTER (WHERE cross_tenant)     AS cross_tenant_gaps
FROM backend_promise_verdicts GROUP BY ALL
ORDER BY run_id, promise_verdict, basis;
