use super::*;

fn col(source: &str, ty: PgType, unicode: bool) -> ViewColumn {
    ViewColumn {
        source_name: source.into(),
        target_name: source.to_lowercase(),
        pg_type: ty,
        unicode,
    }
}

const MONEY: PgType = PgType::Numeric {
    precision: 10,
    scale: 2,
};

fn catalog() -> Catalog {
    let mut c = Catalog::default();
    c.insert(
        "dbo",
        "Customers",
        Relation {
            target: "\"public\".\"customers\"".into(),
            columns: vec![
                col("Id", PgType::Int4, false),
                col("Name", PgType::Varchar { length: 50 }, false),
                col("RegionId", PgType::Int4, false),
            ],
            complete: true,
        },
    );
    c.insert(
        "dbo",
        "Orders",
        Relation {
            target: "\"public\".\"orders\"".into(),
            columns: vec![
                col("Id", PgType::Int4, false),
                col("CustomerId", PgType::Int4, false),
                col("Amount", MONEY, false),
                col("Note", PgType::Varchar { length: 100 }, true),
                col("Ratio", PgType::Float8, false),
                col("Paid", PgType::Bool, false),
            ],
            complete: true,
        },
    );
    c.insert(
        "Sales",
        "Region",
        Relation {
            target: "\"sales\".\"region\"".into(),
            columns: vec![
                col("Id", PgType::Int4, false),
                col("Name", PgType::Varchar { length: 50 }, false),
            ],
            complete: true,
        },
    );
    c
}

fn schema_of(s: &str) -> String {
    if s.eq_ignore_ascii_case("dbo") {
        "public".into()
    } else {
        s.to_lowercase()
    }
}

fn lower(s: &str) -> String {
    s.to_lowercase()
}

fn module(schema: &str, name: &str, definition: &str) -> ModuleDef {
    ModuleDef {
        schema: schema.into(),
        name: name.into(),
        kind: "view".into(),
        definition: definition.into(),
    }
}

fn run(views: &[ModuleDef]) -> Views {
    translate_views(
        views,
        &catalog(),
        &Naming {
            schema: &schema_of,
            ident: &lower,
        },
    )
}

/// The CREATE VIEW of one view, or its refusal.
fn one(definition: &str) -> Result<String, String> {
    let out = run(&[module("dbo", "V", definition)]);
    match (out.translated.first(), out.refused.first()) {
        (Some(v), None) => Ok(v.sql.clone()),
        (None, Some((_, why))) => Err(why.clone()),
        _ => panic!("one view in, one out"),
    }
}

#[track_caller]
fn ok(definition: &str, select: &str) {
    assert_eq!(one(definition).unwrap(), select, "{definition}");
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
fn columns_and_aliases() {
    ok(
        "CREATE VIEW dbo.V AS SELECT Id, Name FROM dbo.Customers",
        "CREATE VIEW \"public\".\"v\" (\"id\", \"name\") AS SELECT \"Customers\".\"id\", \"Customers\".\"name\" \
         FROM \"public\".\"customers\" AS \"Customers\"",
    );
    // Both alias spellings, a string alias, brackets, an unqualified table name, comments,
    // SCHEMABINDING and the final semicolon.
    ok(
        "CREATE VIEW [dbo].[V] WITH SCHEMABINDING AS -- a comment\n\
         SELECT c.[Id] AS [CustomerKey], [Label] = c.Name /* block /* nested */ */, c.Name 'Again' \
         FROM [Customers] c;",
        "CREATE VIEW \"public\".\"v\" (\"customerkey\", \"label\", \"again\") AS SELECT \"c\".\"id\", \"c\".\"name\", \
         \"c\".\"name\" FROM \"public\".\"customers\" AS \"c\"",
    );
    // `--` and `/*` inside a string or a bracketed name are not comments.
    ok(
        "CREATE VIEW dbo.V AS SELECT Id AS [a--b] FROM dbo.Customers WHERE Name <> '--/*' -- the end",
        "CREATE VIEW \"public\".\"v\" (\"a--b\") AS SELECT \"Customers\".\"id\" \
         FROM \"public\".\"customers\" AS \"Customers\" WHERE \"Customers\".\"name\" <> '--/*'",
    );
    // A column list names the columns.
    ok(
        "CREATE VIEW dbo.V (A, B) AS SELECT Id, Id * 2 FROM dbo.Customers",
        "CREATE VIEW \"public\".\"v\" (\"a\", \"b\") AS SELECT \"Customers\".\"id\", \"Customers\".\"id\" * 2 \
         FROM \"public\".\"customers\" AS \"Customers\"",
    );
}

#[test]
fn expressions_use_the_expression_translator() {
    ok(
        "CREATE VIEW dbo.V AS SELECT o.Id, o.Note + N'!' AS Loud, ISNULL(o.Amount, 0) AS Amount, \
         CASE WHEN o.Paid = 1 THEN 'yes' ELSE 'no' END AS PaidText, LEN(o.Note) AS L \
         FROM dbo.Orders AS o WHERE o.Note LIKE '[0-9]%' AND o.Amount BETWEEN 1 AND 10",
        "CREATE VIEW \"public\".\"v\" (\"id\", \"loud\", \"amount\", \"paidtext\", \"l\") AS SELECT \"o\".\"id\", \
         \"o\".\"note\" || '!', coalesce(\"o\".\"amount\", 0), CASE WHEN \"o\".\"paid\" = true THEN 'yes' ELSE 'no' END, \
         length(rtrim(\"o\".\"note\")) FROM \"public\".\"orders\" AS \"o\" \
         WHERE \"o\".\"note\" ~* '^[0-9].*$' AND \"o\".\"amount\" BETWEEN 1 AND 10",
    );
}

#[test]
fn joins() {
    ok(
        "CREATE VIEW dbo.V AS SELECT o.Id, c.Name, r.Name AS Region FROM dbo.Orders o \
         INNER JOIN dbo.Customers c ON c.Id = o.CustomerId \
         LEFT OUTER JOIN Sales.Region r ON r.Id = c.RegionId \
         RIGHT JOIN dbo.Customers c2 ON c2.Id = c.Id FULL OUTER JOIN dbo.Customers c3 ON c3.Id = c2.Id \
         CROSS JOIN Sales.Region r2 JOIN dbo.Orders o2 ON o2.Id = o.Id",
        "CREATE VIEW \"public\".\"v\" (\"id\", \"name\", \"region\") AS SELECT \"o\".\"id\", \"c\".\"name\", \"r\".\"name\" \
         FROM \"public\".\"orders\" AS \"o\" INNER JOIN \"public\".\"customers\" AS \"c\" ON \"c\".\"id\" = \"o\".\"customerid\" \
         LEFT JOIN \"sales\".\"region\" AS \"r\" ON \"r\".\"id\" = \"c\".\"regionid\" \
         RIGHT JOIN \"public\".\"customers\" AS \"c2\" ON \"c2\".\"id\" = \"c\".\"id\" \
         FULL JOIN \"public\".\"customers\" AS \"c3\" ON \"c3\".\"id\" = \"c2\".\"id\" \
         CROSS JOIN \"sales\".\"region\" AS \"r2\" INNER JOIN \"public\".\"orders\" AS \"o2\" ON \"o2\".\"id\" = \"o\".\"id\"",
    );
    // An ON that reads a table joined after it: SQL Server refuses it too.
    refused(
        "CREATE VIEW dbo.V AS SELECT o.Id FROM dbo.Orders o JOIN dbo.Customers c ON c.Id = r.Id JOIN Sales.Region r ON 1 = 1",
        "in the ON of the join to c: [r].[Id] names no table of the FROM clause",
    );
    // A name in only one table needs no qualifier; in two it is ambiguous.
    ok(
        "CREATE VIEW dbo.V AS SELECT CustomerId FROM dbo.Orders o, dbo.Customers c WHERE CustomerId = c.Id",
        "CREATE VIEW \"public\".\"v\" (\"customerid\") AS SELECT \"o\".\"customerid\" \
         FROM \"public\".\"orders\" AS \"o\", \"public\".\"customers\" AS \"c\" WHERE \"o\".\"customerid\" = \"c\".\"id\"",
    );
    refused(
        "CREATE VIEW dbo.V AS SELECT Id FROM dbo.Orders o, dbo.Customers c",
        "item 1 (Id): the column [Id] is ambiguous",
    );
}

#[test]
fn grouping_distinct_and_set_operations() {
    ok(
        "CREATE VIEW dbo.V AS SELECT o.CustomerId, COUNT(*) AS N, SUM(o.Amount) AS Total, MAX(o.Id) AS Last, \
         COUNT(DISTINCT o.Note) AS Notes FROM dbo.Orders o GROUP BY o.CustomerId HAVING COUNT(*) > 1",
        "CREATE VIEW \"public\".\"v\" (\"customerid\", \"n\", \"total\", \"last\", \"notes\") AS SELECT \"o\".\"customerid\", \
         count(*), sum(\"o\".\"amount\"), max(\"o\".\"id\"), count(DISTINCT \"o\".\"note\") FROM \"public\".\"orders\" AS \"o\" \
         GROUP BY \"o\".\"customerid\" HAVING count(*) > 1",
    );
    ok(
        "CREATE VIEW dbo.V AS SELECT DISTINCT Name FROM dbo.Customers UNION ALL SELECT Name FROM Sales.Region \
         UNION SELECT Name FROM dbo.Customers EXCEPT SELECT 'x' INTERSECT SELECT NULL",
        "CREATE VIEW \"public\".\"v\" (\"name\") AS SELECT DISTINCT \"Customers\".\"name\" FROM \"public\".\"customers\" AS \"Customers\" \
         UNION ALL SELECT \"Region\".\"name\" FROM \"sales\".\"region\" AS \"Region\" \
         UNION SELECT \"Customers\".\"name\" FROM \"public\".\"customers\" AS \"Customers\" \
         EXCEPT SELECT 'x' INTERSECT SELECT NULL",
    );
    ok(
        "CREATE VIEW dbo.V AS SELECT * FROM Sales.Region WHERE Name > 'A'",
        "CREATE VIEW \"public\".\"v\" (\"id\", \"name\") AS SELECT \"Region\".\"id\", \"Region\".\"name\" \
         FROM \"sales\".\"region\" AS \"Region\" WHERE \"Region\".\"name\" > 'A'",
    );
    refused(
        "CREATE VIEW dbo.V AS SELECT * FROM dbo.Customers c JOIN Sales.Region r ON r.Id = c.RegionId",
        "two columns are named \"id\" in PostgreSQL",
    );
    ok(
        "CREATE VIEW dbo.V AS SELECT r.*, c.Id AS C FROM dbo.Customers c JOIN Sales.Region r ON r.Id = c.RegionId",
        "CREATE VIEW \"public\".\"v\" (\"id\", \"name\", \"c\") AS SELECT \"r\".\"id\", \"r\".\"name\", \"c\".\"id\" \
         FROM \"public\".\"customers\" AS \"c\" INNER JOIN \"sales\".\"region\" AS \"r\" ON \"r\".\"id\" = \"c\".\"regionid\"",
    );
}

#[test]
fn views_over_views_in_dependency_order() {
    let out = run(&[
        module(
            "dbo",
            "Top",
            "CREATE VIEW dbo.Top AS SELECT Big + 1 AS Bigger FROM dbo.Mid",
        ),
        module(
            "dbo",
            "Mid",
            "CREATE VIEW dbo.Mid AS SELECT o.Amount * 2 AS Big FROM dbo.Orders o",
        ),
        module(
            "dbo",
            "Bad",
            "CREATE VIEW dbo.Bad AS SELECT TOP 1 Id FROM dbo.Orders",
        ),
        module("dbo", "OverBad", "CREATE VIEW dbo.OverBad AS SELECT Id FROM Bad"),
    ]);
    let names: Vec<&str> = out.translated.iter().map(|v| v.source_name.as_str()).collect();
    assert_eq!(names, ["Mid", "Top"]);
    assert_eq!(
        out.translated[1].sql,
        "CREATE VIEW \"public\".\"top\" (\"bigger\") AS SELECT \"Mid\".\"big\" + 1 FROM \"public\".\"mid\" AS \"Mid\""
    );
    let refused: Vec<(&str, &str)> = out
        .refused
        .iter()
        .map(|(m, why)| (m.name.as_str(), why.as_str()))
        .collect();
    assert_eq!(
        refused,
        [
            (
                "Bad",
                "TOP is not translated (a view's rows have no order in PostgreSQL)"
            ),
            ("OverBad", "it reads the view dbo.Bad, which is not migrated"),
        ]
    );
    let w = Views::warning(&out.refused[0].0, &out.refused[0].1);
    assert!(w.starts_with("view dbo.Bad is not migrated (port it by hand): TOP is not translated"));
    assert!(w.ends_with("its definition: CREATE VIEW dbo.Bad AS SELECT TOP 1 Id FROM dbo.Orders"));
}

#[test]
fn unsupported_constructs_are_refused_with_where() {
    for (definition, reason) in [
        (
            "CREATE VIEW dbo.V AS SELECT Id FROM dbo.Orders ORDER BY Id OFFSET 0 ROWS",
            "ORDER BY in a view",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT TOP (10) PERCENT Id FROM dbo.Orders",
            "TOP is not translated",
        ),
        (
            "CREATE VIEW dbo.V AS WITH x AS (SELECT Id FROM dbo.Orders) SELECT Id FROM x",
            "a common table expression",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT o.Note.value('(/a)[1]', 'int') AS A FROM dbo.Orders o",
            "item 1 (o.Note.value('(/a)[1]', 'int') AS A): the XML method o.Note.value() is not translated",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT YEAR(o.Id) AS Y FROM dbo.Orders o",
            "item 1 (YEAR(o.Id) AS Y): function YEAR is not translated",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT dbo.f(o.Id) AS Y FROM dbo.Orders o",
            "the function dbo.f() is not translated",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT Id FROM dbo.Elsewhere",
            "it reads dbo.Elsewhere, which is not migrated",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT Id FROM OtherDb.dbo.Orders",
            "OtherDb.dbo.Orders names another database or server",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT AVG(o.Amount) AS A FROM dbo.Orders o",
            "AVG() is not translated",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT SUM(o.Ratio) AS A FROM dbo.Orders o",
            "SUM() of a float",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT MAX(o.Note) AS A FROM dbo.Orders o",
            "MAX() of a string",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT Id FROM dbo.Orders WHERE CustomerId IN (SELECT Id FROM dbo.Customers)",
            "in WHERE: a subquery is not translated",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT o.Id FROM dbo.Orders o CROSS APPLY dbo.Customers c",
            "in FROM: CROSS APPLY is not translated",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT p.Id FROM (SELECT Id FROM dbo.Orders) p",
            "a derived table",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT Id FROM dbo.Orders WITH (NOLOCK)",
            "a table hint on dbo.Orders",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT Id FROM dbo.Orders o PIVOT (SUM(Amount) FOR Id IN ([1])) p",
            "in FROM: PIVOT is not translated",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT Id FROM dbo.Orders UNION SELECT Name FROM dbo.Customers",
            "UNION of columns of different types",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT Id FROM dbo.Orders WHERE Id > 1 WITH CHECK OPTION",
            "WITH CHECK OPTION",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT CustomerId, COUNT(*) AS N FROM dbo.Orders GROUP BY ROLLUP(CustomerId)",
            "GROUP BY ROLLUP",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT Id FROM dbo.Orders FOR XML PATH('')",
            "FOR XML PATH('') is not translated",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT o.Id * 2 FROM dbo.Orders o",
            "column 1 of the SELECT has no name",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT Id FROM dbo.Orders WHERE Note = 5",
            "in WHERE: comparing \"Orders\".\"note\" with 5: SQL Server converts one implicitly",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT Id FROM dbo.Orders WHERE Id IN (1, '2')",
            "comparing \"Orders\".\"id\" with '2'",
        ),
        (
            "CREATE VIEW dbo.V AS SELECT o.Id FROM dbo.Orders o LEFT HASH JOIN dbo.Customers c ON c.Id = o.Id",
            "in FROM: LEFT HASH JOIN is not translated",
        ),
    ] {
        refused(definition, reason);
    }
}

#[test]
fn unqualified_names_in_two_schemas_are_refused() {
    let mut c = catalog();
    c.insert(
        "Sales",
        "Customers",
        Relation {
            target: "\"sales\".\"customers\"".into(),
            columns: vec![col("Id", PgType::Int4, false)],
            complete: true,
        },
    );
    let out = translate_views(
        &[module(
            "Sales",
            "V",
            "CREATE VIEW Sales.V AS SELECT Id FROM Customers",
        )],
        &c,
        &Naming {
            schema: &schema_of,
            ident: &lower,
        },
    );
    assert!(
        out.refused[0].1.contains("exists in schemas Sales and dbo"),
        "{:?}",
        out.refused
    );
    // In the view's own schema only: that one.
    let out = run(&[module(
        "Sales",
        "V",
        "CREATE VIEW Sales.V AS SELECT Name FROM Region",
    )]);
    assert_eq!(
        out.translated[0].sql,
        "CREATE VIEW \"sales\".\"v\" (\"name\") AS SELECT \"Region\".\"name\" FROM \"sales\".\"region\" AS \"Region\""
    );
}
