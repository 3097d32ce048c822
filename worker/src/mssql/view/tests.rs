use super::*;
use crate::mssql::expr_cast::IntType;

fn col(name: &str, operand: Operand) -> MsViewColumn {
    MsViewColumn {
        source_name: name.into(),
        target_name: name.into(),
        operand,
    }
}

fn catalog() -> MsCatalog {
    let mut c = MsCatalog::default();
    c.insert(
        "public",
        "customers",
        MsRelation {
            target: "[dbo].[customers]".into(),
            columns: vec![
                col("id", Operand::Int(IntType::Int)),
                col("name", Operand::Str { len: Some(50) }),
                col("regionid", Operand::Int(IntType::Int)),
                col("active", Operand::Bool),
            ],
        },
    );
    c.insert(
        "sales",
        "orders",
        MsRelation {
            target: "[sales].[orders]".into(),
            columns: vec![
                col("id", Operand::Int(IntType::Big)),
                col("cid", Operand::Int(IntType::Int)),
                col(
                    "amount",
                    Operand::Decimal {
                        precision: 10,
                        scale: 2,
                    },
                ),
                col("note", Operand::Str { len: None }),
                col("code", Operand::Bpchar),
                col("ratio", Operand::Float),
            ],
        },
    );
    c
}

fn schema_of(s: &str) -> String {
    if s == "public" { "dbo".into() } else { s.into() }
}

fn view(schema: &str, name: &str, definition: &str) -> ModuleDef {
    ModuleDef {
        schema: schema.into(),
        name: name.into(),
        kind: "view".into(),
        definition: definition.into(),
    }
}

fn one(definition: &str) -> Result<String, String> {
    let out = translate_views(&[view("public", "v", definition)], &catalog(), &schema_of);
    match (out.translated.first(), out.refused.first()) {
        (Some(v), None) => Ok(v.sql.clone()),
        (None, Some((_, why))) => Err(why.clone()),
        _ => panic!("one view in, one out"),
    }
}

#[track_caller]
fn ok(definition: &str, sql: &str) {
    assert_eq!(
        one(definition).unwrap_or_else(|e| panic!("{definition}: {e}")),
        sql
    );
}

#[track_caller]
fn refused(definition: &str, reason: &str) {
    let why = one(definition).expect_err(definition);
    assert!(
        why.contains(reason),
        "{definition}: {why:?} does not say {reason:?}"
    );
}

#[test]
fn joins_where_group_by_and_aggregates_as_pg_get_viewdef_prints_them() {
    ok(
        " SELECT c.id,\n    c.name AS n,\n    count(*) AS count,\n    sum(o.amount) AS total,\n    \
         upper((c.name)::text) AS upper\n   FROM ((public.customers c\n     JOIN sales.orders o ON ((o.cid = c.id)))\n     \
         LEFT JOIN public.customers c2 ON ((c2.id = c.regionid)))\n  WHERE ((o.amount > (10)::numeric) AND \
         ((c.name)::text ~~ 'A%'::text))\n  GROUP BY c.id, c.name\n HAVING (count(*) > 1);",
        "CREATE VIEW [dbo].[v] AS SELECT [c].[id] AS [id], [c].[name] AS [n], COUNT_BIG(*) AS [count], \
         SUM([o].[amount]) AS [total], UPPER(([c].[name])) AS [upper] \
         FROM (([dbo].[customers] AS [c] INNER JOIN [sales].[orders] AS [o] ON (([o].[cid] = [c].[id]))) \
         LEFT JOIN [dbo].[customers] AS [c2] ON (([c2].[id] = [c].[regionid]))) \
         WHERE (([o].[amount] > (10)) AND (([c].[name]) LIKE N'A%' COLLATE Latin1_General_100_BIN2)) \
         GROUP BY [c].[id], [c].[name] HAVING (COUNT_BIG(*) > 1)",
    );
}

#[test]
fn distinct_set_operations_and_sums_widened_as_postgresql_sums() {
    // A product of decimals within 38 digits has the same scale and value in both.
    ok(
        " SELECT (o.amount * (o.id)::numeric) AS product\n   FROM sales.orders o;",
        "CREATE VIEW [dbo].[v] AS SELECT ([o].[amount] * CAST(([o].[id]) AS decimal(19,0))) AS [product] \
         FROM [sales].[orders] AS [o]",
    );
    ok(
        " SELECT DISTINCT customers.name\n   FROM public.customers\nUNION ALL\n SELECT orders.note AS name\n   \
         FROM sales.orders\n  WHERE ((orders.code = 'ab'::bpchar) OR (orders.id = ANY (ARRAY[1, 2])));",
        "CREATE VIEW [dbo].[v] AS SELECT DISTINCT [customers].[name] AS [name] FROM [dbo].[customers] AS [customers] \
         UNION ALL SELECT [orders].[note] FROM [sales].[orders] AS [orders] \
         WHERE (([orders].[code] = N'ab') OR ([orders].[id] IN (1, 2)))",
    );
    ok(
        " SELECT o.cid,\n    sum(o.cid) AS s,\n    sum(o.id) AS t,\n    max(o.amount) AS m,\n    \
         count(DISTINCT o.note) AS n\n   FROM sales.orders o\n  GROUP BY o.cid;",
        "CREATE VIEW [dbo].[v] AS SELECT [o].[cid] AS [cid], SUM(CAST([o].[cid] AS bigint)) AS [s], \
         SUM(CAST([o].[id] AS decimal(38,0))) AS [t], MAX([o].[amount]) AS [m], COUNT_BIG(DISTINCT [o].[note]) AS [n] \
         FROM [sales].[orders] AS [o] GROUP BY [o].[cid]",
    );
    // Parentheses only where T-SQL's precedence needs them.
    ok(
        "(\n         SELECT customers.id\n           FROM public.customers\n        UNION\n         SELECT orders.cid AS id\n           \
         FROM sales.orders\n) EXCEPT\n SELECT customers.id\n   FROM public.customers\n  WHERE (customers.id = 2);",
        "CREATE VIEW [dbo].[v] AS SELECT [customers].[id] AS [id] FROM [dbo].[customers] AS [customers] \
         UNION SELECT [orders].[cid] FROM [sales].[orders] AS [orders] \
         EXCEPT SELECT [customers].[id] FROM [dbo].[customers] AS [customers] WHERE ([customers].[id] = 2)",
    );
    ok(
        " SELECT customers.id\n   FROM public.customers\nEXCEPT (\n         SELECT orders.cid AS id\n           FROM sales.orders\n        \
         UNION\n         SELECT customers.regionid AS id\n           FROM public.customers\n);",
        "CREATE VIEW [dbo].[v] AS SELECT [customers].[id] AS [id] FROM [dbo].[customers] AS [customers] \
         EXCEPT (SELECT [orders].[cid] FROM [sales].[orders] AS [orders] \
         UNION SELECT [customers].[regionid] FROM [dbo].[customers] AS [customers])",
    );
    ok(
        " SELECT customers.id\n   FROM public.customers\nEXCEPT\n SELECT orders.cid AS id\n   FROM sales.orders;",
        "CREATE VIEW [dbo].[v] AS SELECT [customers].[id] AS [id] FROM [dbo].[customers] AS [customers] \
         EXCEPT SELECT [orders].[cid] FROM [sales].[orders] AS [orders]",
    );
}

#[test]
fn boolean_columns_tested_as_conditions_are_compared() {
    ok(
        " SELECT c.id,\n        CASE\n            WHEN (NOT c.active) THEN 'gone'::text\n            ELSE 'active'::text\n        END AS state\n   \
         FROM public.customers c\n  WHERE (c.active OR (c.id > 2));",
        "CREATE VIEW [dbo].[v] AS SELECT [c].[id] AS [id], CASE WHEN (NOT [c].[active] = 1) THEN N'gone' ELSE N'active' END AS [state] \
         FROM [dbo].[customers] AS [c] WHERE ([c].[active] = 1 OR ([c].[id] > 2))",
    );
}

#[test]
fn conditions_selected_as_bits() {
    ok(
        " SELECT (c.id > 1) AS big,\n    (c.active AND (c.regionid IS NULL)) AS lone\n   FROM public.customers c;",
        "CREATE VIEW [dbo].[v] AS SELECT CASE WHEN ([c].[id] > 1) THEN CAST(1 AS bit) WHEN NOT (([c].[id] > 1)) \
         THEN CAST(0 AS bit) END AS [big], CASE WHEN ([c].[active] = 1 AND ([c].[regionid] IS NULL)) THEN CAST(1 AS bit) \
         WHEN NOT (([c].[active] = 1 AND ([c].[regionid] IS NULL))) THEN CAST(0 AS bit) END AS [lone] \
         FROM [dbo].[customers] AS [c]",
    );
}

#[test]
fn views_over_views_in_dependency_order() {
    let out = translate_views(
        &[
            view(
                "public",
                "top",
                " SELECT mid.big + 1 AS bigger\n   FROM public.mid;",
            ),
            view(
                "public",
                "mid",
                " SELECT (o.amount * (2)::numeric) AS big\n   FROM sales.orders o;",
            ),
            view("public", "bad", " SELECT o.id\n   FROM sales.orders o\n LIMIT 1;"),
            view("public", "overbad", " SELECT bad.id\n   FROM public.bad;"),
        ],
        &catalog(),
        &schema_of,
    );
    let names: Vec<&str> = out.translated.iter().map(|v| v.source_name.as_str()).collect();
    assert_eq!(names, ["mid", "top"]);
    assert_eq!(
        out.translated[1].sql,
        "CREATE VIEW [dbo].[top] AS SELECT [mid].[big] + 1 AS [bigger] FROM [dbo].[mid] AS [mid]"
    );
    let refused: Vec<(&str, &str)> = out
        .refused
        .iter()
        .map(|(m, why)| (m.name.as_str(), why.as_str()))
        .collect();
    assert_eq!(
        refused,
        [
            ("bad", "ORDER BY, LIMIT or OFFSET in a view is not translated"),
            ("overbad", "it reads the view public.bad, which is not migrated"),
        ]
    );
}

#[test]
fn what_is_not_exact_is_refused_with_where() {
    for (definition, reason) in [
        (
            " SELECT avg(o.amount) AS avg\n   FROM sales.orders o;",
            "avg() is not translated",
        ),
        (
            " SELECT (o.amount / (3)::numeric) AS third\n   FROM sales.orders o;",
            "/ or % of decimals is not translated",
        ),
        (
            " SELECT (o.amount * (o.id)::numeric(30,0)) AS product\n   FROM sales.orders o;",
            "a product of decimals wider than 38 digits",
        ),
        (
            " SELECT sum(o.ratio) AS sum\n   FROM sales.orders o;",
            "SUM() of a float",
        ),
        (
            " SELECT max(o.note) AS max\n   FROM sales.orders o;",
            "MAX() of a string",
        ),
        (
            " SELECT o.id\n   FROM sales.orders o\n  WHERE (o.cid IN ( SELECT customers.id\n           FROM public.customers));",
            "in WHERE: a subquery is not translated",
        ),
        (
            " SELECT c.id\n   FROM public.customers c\n  WHERE (c.id + 1);",
            "in WHERE: the condition (c.id + 1) is not one T-SQL can test",
        ),
        (
            " SELECT x.id\n   FROM public.elsewhere x;",
            "it reads public.elsewhere, which is not migrated",
        ),
        (
            " SELECT o.id,\n    row_number() OVER (ORDER BY o.id) AS n\n   FROM sales.orders o;",
            "a window function is not translated",
        ),
        (
            " WITH x AS (\n         SELECT customers.id\n           FROM public.customers\n        )\n SELECT x.id\n   FROM x;",
            "a common table expression",
        ),
        (
            " SELECT customers.id\n   FROM public.customers\nINTERSECT ALL\n SELECT orders.cid AS id\n   FROM sales.orders;",
            "INTERSECT ALL is not translated",
        ),
        (
            " SELECT customers.id\n   FROM public.customers\nUNION\n SELECT orders.ratio AS id\n   FROM sales.orders;",
            "UNION of columns of different types",
        ),
        (
            " SELECT c.id,\n    c.id AS \"ID\"\n   FROM public.customers c;",
            "two columns are named [ID]",
        ),
        (
            " SELECT c.id\n   FROM (public.customers c\n     JOIN sales.orders o USING (id));",
            "a join USING or NATURAL",
        ),
        (" SELECT g.g\n   FROM generate_series(1, 3) g(g);", "in FROM"),
        (" SELECT (o.ratio)::text AS t\n   FROM sales.orders o;", "item 1"),
    ] {
        refused(definition, reason);
    }
}
