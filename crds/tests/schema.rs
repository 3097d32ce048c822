#![allow(clippy::unwrap_used)]
//! The generated CRDs carry the admission rules, and those rules accept and reject what they should
//! (evaluated client-side with kube's CEL implementation; no apiserver needed).

use mssql_pg_crds::generate;
use serde_json::{Value, json};

fn schema_of(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Value {
    let v = serde_json::to_value(crd).unwrap();
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn rules(schema: &Value) -> Vec<String> {
    schema["x-kubernetes-validations"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["rule"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn migration_schema_has_cel_rules_list_map_and_defaults() {
    let s = schema_of(&generate::migration_crd());
    let spec = &s["properties"]["spec"];
    let spec_rules = rules(spec);
    assert_eq!(spec_rules.len(), 3, "{spec_rules:?}");
    assert_eq!(spec_rules[0], "has(self.source.mssql) != has(self.target.mssql)");
    assert!(spec_rules[1].contains("'_mssqlpg'"), "{}", spec_rules[1]);
    // The transition rule: everything planned is immutable; suspend, parallelism and worker are not named.
    for field in [
        "source",
        "target",
        "tables",
        "mode",
        "schema",
        "partitioning",
        "chunkBytes",
        "verify",
        "dryRun",
    ] {
        assert!(
            spec_rules[2].contains(&format!("self.{field} == oldSelf.{field}")),
            "{field}: {}",
            spec_rules[2]
        );
    }
    // chunkRows may be absent (no row cap), so the rule compares it only when present on both.
    assert!(
        spec_rules[2].contains(
            "has(self.chunkRows) == has(oldSelf.chunkRows) && (!has(self.chunkRows) || self.chunkRows == oldSelf.chunkRows)"
        ),
        "{}",
        spec_rules[2]
    );
    for field in ["suspend", "parallelism", "worker"] {
        assert!(!spec_rules[2].contains(&format!("self.{field}")), "{field}");
    }
    for side in ["source", "target"] {
        assert_eq!(
            rules(&spec["properties"][side]),
            vec!["has(self.mssql) != has(self.postgres)"]
        );
    }
    assert_eq!(rules(&s), vec!["size(self.metadata.name) <= 40"]);

    let conditions = &s["properties"]["status"]["properties"]["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));

    let mssql = &spec["properties"]["source"]["properties"]["mssql"]["properties"];
    assert_eq!(mssql["port"]["default"], 1433);
    assert_eq!(mssql["packetSize"]["minimum"], 512.0);
    assert_eq!(mssql["packetSize"]["maximum"], 32767.0);
    assert_eq!(mssql["encryption"]["default"], "Required");
    assert_eq!(mssql["host"]["minLength"], 1);
    let pg = &spec["properties"]["target"]["properties"]["postgres"]["properties"];
    assert_eq!(pg["sslMode"]["default"], "prefer");
    assert_eq!(pg["schema"]["default"], "public");
    assert_eq!(spec["properties"]["parallelism"]["default"], 4);
    assert_eq!(spec["properties"]["parallelism"]["minimum"], 1.0);
    assert_eq!(spec["properties"]["chunkBytes"]["default"], "64Mi");
    assert_eq!(
        spec["properties"]["chunkBytes"]["x-kubernetes-int-or-string"],
        true
    );
    assert_eq!(spec["properties"]["chunkRows"].get("default"), None);
    assert_eq!(spec["properties"]["chunkRows"]["minimum"], 1.0);
    assert_eq!(spec["properties"]["verify"]["default"], "checksum");
    assert_eq!(
        spec["properties"]["tables"]["default"],
        json!({"include": ["*"], "exclude": []})
    );
    assert_eq!(spec["properties"]["schema"]["default"]["foreignKeys"], true);
    assert_eq!(
        spec["properties"]["partitioning"]["default"]["maxPartitionsPerTable"],
        16
    );
    assert_eq!(
        spec["properties"]["worker"]["default"],
        json!({"backoffLimit": 3})
    );

    // Option<enum> must not list null as an allowed value.
    let phase = &s["properties"]["status"]["properties"]["phase"];
    assert!(
        !phase["enum"].as_array().unwrap().iter().any(Value::is_null),
        "{phase}"
    );
}

#[test]
fn crd_names_and_printer_columns() {
    let mig = serde_json::to_value(generate::migration_crd()).unwrap();
    assert_eq!(mig["spec"]["names"]["shortNames"], json!(["mig"]));
    assert_eq!(mig["spec"]["names"]["categories"], json!(["all"]));
    assert_eq!(mig["spec"]["versions"][0]["subresources"]["status"], json!({}));
    let cols: Vec<&str> = mig["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Phase", "Progress", "Rows", "Rows/s", "ETA", "Lag", "Age"]);

    let task = serde_json::to_value(generate::migration_task_crd()).unwrap();
    assert_eq!(task["spec"]["names"]["shortNames"], json!(["mtask"]));
    assert_eq!(task["spec"]["versions"][0]["subresources"]["status"], json!({}));
    let cols: Vec<&str> = task["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        cols,
        [
            "Table",
            "Partition",
            "State",
            "Rows",
            "Rows/s",
            "Job Failure",
            "Age"
        ]
    );
    // The operator's record of a failed Job shows with `-o wide` only.
    let job_failure = &task["spec"]["versions"][0]["additionalPrinterColumns"][5];
    assert_eq!(job_failure["jsonPath"], ".status.jobFailure");
    assert_eq!(job_failure["priority"], 1);
}

fn migration(source: Value, target: Value) -> Value {
    json!({
        "apiVersion": "mssqlpg.dev/v1alpha1",
        "kind": "Migration",
        "metadata": {"name": "orders", "namespace": "data"},
        "spec": {"source": source, "target": target}
    })
}

fn mssql() -> Value {
    json!({"mssql": {"host": "sql", "database": "db", "credentialsSecret": "a"}})
}

fn pg() -> Value {
    json!({"postgres": {"host": "pg", "database": "db", "credentialsSecret": "b"}})
}

fn cel_errors(schema: &Value, object: &Value) -> Vec<String> {
    match kube::core::cel::Validator::new().validate(schema, object, None) {
        Ok(()) => Vec::new(),
        Err(e) => e
            .into_vec()
            .into_iter()
            .map(|e| format!("{}: {}", e.field_path, e.message))
            .collect(),
    }
}

#[test]
fn cel_rules_accept_valid_migrations_in_both_directions() {
    let s = schema_of(&generate::migration_crd());
    assert_eq!(cel_errors(&s, &migration(mssql(), pg())), Vec::<String>::new());
    assert_eq!(cel_errors(&s, &migration(pg(), mssql())), Vec::<String>::new());
}

#[test]
fn cel_rules_reject_same_engine_and_ambiguous_endpoints() {
    let s = schema_of(&generate::migration_crd());
    let errs = cel_errors(&s, &migration(mssql(), mssql()));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("different engines"), "{errs:?}");

    let both = json!({
        "mssql": {"host": "sql", "database": "db", "credentialsSecret": "a"},
        "postgres": {"host": "pg", "database": "db", "credentialsSecret": "b"}
    });
    let errs = cel_errors(&s, &migration(both, pg()));
    assert!(
        errs.iter()
            .any(|e| e.contains("source") && e.contains("exactly one")),
        "{errs:?}"
    );

    let errs = cel_errors(&s, &migration(json!({}), pg()));
    assert!(
        errs.iter()
            .any(|e| e.contains("source") && e.contains("exactly one")),
        "{errs:?}"
    );

    let mut long = migration(mssql(), pg());
    long["metadata"]["name"] = json!("m".repeat(41));
    let errs = cel_errors(&s, &long);
    assert!(errs.iter().any(|e| e.contains("at most 40")), "{errs:?}");
}

fn task(partition: Value) -> Value {
    json!({
        "apiVersion": "mssqlpg.dev/v1alpha1",
        "kind": "MigrationTask",
        "metadata": {"name": "orders-dbo-posts-1-abcdef01"},
        "spec": {
            "migration": "orders",
            "table": {"schema": "dbo", "name": "Posts"},
            "targetTable": {"schema": "public", "name": "Posts"},
            "partition": partition
        }
    })
}

#[test]
fn cel_rules_check_task_partitions() {
    let s = schema_of(&generate::migration_task_crd());
    let ok = serde_json::to_value(mssql_pg_crds::PartitionSpec::new(
        1,
        8,
        Some("Id".into()),
        None,
        None,
    ))
    .unwrap();
    assert_eq!(cel_errors(&s, &task(ok)), Vec::<String>::new());
    let whole = serde_json::to_value(mssql_pg_crds::PartitionSpec::whole_table()).unwrap();
    assert_eq!(cel_errors(&s, &task(whole)), Vec::<String>::new());

    let errs = cel_errors(
        &s,
        &task(json!({"index": 8, "count": 8, "label": "9/8", "keyColumn": "Id"})),
    );
    assert!(
        errs.iter().any(|e| e.contains("index must be below count")),
        "{errs:?}"
    );
    let errs = cel_errors(&s, &task(json!({"index": 1, "count": 8, "label": "2/8"})));
    assert!(errs.iter().any(|e| e.contains("needs keyColumn")), "{errs:?}");
}

#[test]
fn committed_files_match_the_types() {
    // The same check as crds/check-generated.sh, so `cargo test` alone catches a stale CRD.
    let root = env!("CARGO_MANIFEST_DIR");
    for (file, crd) in generate::all() {
        let chart = format!(
            "{root}/../charts/mssql-pg-operator/{}/{file}",
            generate::CHART_TEMPLATE_DIR
        );
        for (path, want) in [
            (
                format!("{root}/generated/{file}"),
                generate::to_yaml(&crd).unwrap(),
            ),
            (chart, generate::to_chart_template(&crd).unwrap()),
        ] {
            let have = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                have == want,
                "{path} is stale: run `make crds` and commit the result"
            );
        }
    }
}

#[test]
fn chart_templates_keep_the_crds_and_quote_template_braces() {
    let (_, mut crd) = generate::all().into_iter().next().unwrap();
    let template = generate::to_chart_template(&crd).unwrap();
    assert!(
        template.contains("    helm.sh/resource-policy: keep\n"),
        "{template}"
    );
    assert!(template.contains("{{- if (.Values.crds | default (dict \"install\" true)).install }}\n"));
    assert!(template.ends_with("{{- end }}\n"));
    crd.spec.names.kind = "Has{{Braces}}".into();
    let template = generate::to_chart_template(&crd).unwrap();
    assert!(template.contains("kind: Has{{ \"{{\" }}Braces}}\n"), "{template}");
}

#[test]
fn yaml11_booleans_are_quoted_for_kubectl() {
    let (_, crd) = generate::all().into_iter().next().unwrap();
    let yaml = generate::to_yaml(&crd).unwrap();
    assert!(
        yaml.contains("- 'On'\n") && yaml.contains("- 'Off'\n"),
        "encryption enum must be quoted"
    );
    assert!(!yaml.contains("- On\n") && !yaml.contains("- Off\n"));
    // Still the same document for a YAML 1.2 reader.
    let back: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_norway::from_str(&yaml).unwrap();
    assert_eq!(back, crd);
}

#[test]
fn schema_map_is_a_list_map_keyed_by_from_and_refuses_the_worker_schema() {
    let s = schema_of(&generate::migration_crd());
    for engine in ["mssql", "postgres"] {
        let map =
            &s["properties"]["spec"]["properties"]["target"]["properties"][engine]["properties"]["schemaMap"];
        assert_eq!(map["x-kubernetes-list-type"], "map", "{engine}: {map}");
        assert_eq!(map["x-kubernetes-list-map-keys"], json!(["from"]), "{engine}");
    }
    let mut target = pg();
    target["postgres"]["schemaMap"] = json!([{"from": "Sales", "to": "sales"}]);
    assert_eq!(
        cel_errors(&s, &migration(mssql(), target.clone())),
        Vec::<String>::new()
    );
    target["postgres"]["schemaMap"] = json!([{"from": "Sales", "to": "_MSSQLPG"}]);
    let errs = cel_errors(&s, &migration(mssql(), target));
    assert!(
        errs.iter()
            .any(|e| e.contains("schemaMap") && e.contains("worker's own schema")),
        "{errs:?}"
    );
}

#[test]
fn cel_rules_refuse_the_workers_schema_as_the_target_schema() {
    let s = schema_of(&generate::migration_crd());
    let mut target = pg();
    target["postgres"]["schema"] = json!("_MSSQLPG");
    let errs = cel_errors(&s, &migration(mssql(), target));
    assert!(
        errs.iter()
            .any(|e| e.contains("spec.target.*.schema") && e.contains("worker's own schema")),
        "{errs:?}"
    );
    let mut target = mssql();
    target["mssql"]["schema"] = json!("_mssqlpg");
    assert_eq!(cel_errors(&s, &migration(pg(), target)).len(), 1);
    // Only the target's: a source schema of that name is read, not written.
    let mut source = mssql();
    source["mssql"]["schema"] = json!("_mssqlpg");
    assert_eq!(cel_errors(&s, &migration(source, pg())), Vec::<String>::new());
}
