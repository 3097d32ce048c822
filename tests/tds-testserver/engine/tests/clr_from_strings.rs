//! Strings to hierarchyid and geography, as SQL Server converts them: implicitly on a write to
//! such a column and by CAST/CONVERT (hierarchyid::Parse, geography::Parse with SRID 4326),
//! invalid text refused with 6522 and the .NET exception's number.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::Value;

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => panic!("not text: {other:?}"),
    }
}

#[test]
fn strings_convert_to_hierarchyid() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE h (id int PRIMARY KEY, node hierarchyid NULL, lvl AS node.GetLevel())",
    );
    exec(
        &mut s,
        "INSERT INTO h (id, node) VALUES (1, N'/'), (2, '/1/'), (3, N'/1/2.5/'), (4, N'/-1/0.1/3/'), (5, NULL)",
    );
    let (_, rows) = query(&mut s, "SELECT node.ToString(), lvl FROM h ORDER BY id");
    let got: Vec<(Option<String>, Value)> = rows
        .iter()
        .map(|r| {
            (
                if r[0] == Value::Null {
                    None
                } else {
                    Some(text(&r[0]))
                },
                r[1].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (Some("/".into()), Value::SmallInt(0)),
            (Some("/1/".into()), Value::SmallInt(1)),
            (Some("/1/2.5/".into()), Value::SmallInt(2)),
            (Some("/-1/0.1/3/".into()), Value::SmallInt(3)),
            (None, Value::Null),
        ]
    );
    // SQL Server's binary form.
    assert_eq!(
        scalar(&mut s, "SELECT CAST(node AS varbinary(10)) FROM h WHERE id = 2"),
        Value::Binary(vec![0x58])
    );
    exec(&mut s, "UPDATE h SET node = N'/3/' WHERE id = 1");
    assert_eq!(
        text(&scalar(&mut s, "SELECT node.ToString() FROM h WHERE id = 1")),
        "/3/"
    );
    // Parameters are strings too.
    run_params(
        &mut s,
        "INSERT INTO h (id, node) VALUES (6, @P1)",
        &[(
            tds_testserver_engine::SqlType::NVarChar { len: Some(10) },
            Value::String("/7/".into()),
        )],
    );
    assert_eq!(
        text(&scalar(&mut s, "SELECT node.ToString() FROM h WHERE id = 6")),
        "/7/"
    );
    // CAST and CONVERT.
    assert_eq!(
        scalar(&mut s, "SELECT CAST(N'/1/' AS hierarchyid)"),
        Value::Binary(vec![0x58])
    );
    assert_eq!(
        scalar(&mut s, "SELECT CONVERT(hierarchyid, '/1/1/')"),
        Value::Binary(vec![0x5A, 0xC0])
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM h WHERE node = CAST('/1/2.5/' AS hierarchyid)"
        ),
        Value::Int(1)
    );
    exec(
        &mut s,
        "INSERT INTO h (id, node) SELECT 7, CAST(N'/9/' AS hierarchyid)",
    );
    assert_eq!(
        text(&scalar(&mut s, "SELECT node.ToString() FROM h WHERE id = 7")),
        "/9/"
    );
}

#[test]
fn invalid_hierarchyid_strings_are_refused() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE h (id int PRIMARY KEY, node hierarchyid NULL)",
    );
    for bad in ["1/", "/1", "/01/", "/a/", "/1//"] {
        let e = error(&mut s, &format!("INSERT INTO h VALUES (1, N'{bad}')"));
        assert_eq!(e.number, 6522, "{bad:?}");
        assert!(
            e.message.contains("24001: SqlHierarchyId.Parse failed"),
            "{}",
            e.message
        );
        assert_eq!(
            error(&mut s, &format!("SELECT CAST(N'{bad}' AS hierarchyid)")).number,
            6522
        );
    }
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM h"), Value::Int(0));
    assert_eq!(error(&mut s, "SELECT CAST(1 AS hierarchyid)").number, 529);
}

#[test]
fn well_known_text_converts_to_geography() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE g (id int PRIMARY KEY, loc geography NULL)");
    exec(
        &mut s,
        "INSERT INTO g VALUES (1, N'POINT(-122.164644615406 47.7869921906598)'), (2, 'POINT (1 2 3)')",
    );
    assert_eq!(
        text(&scalar(&mut s, "SELECT loc.ToString() FROM g WHERE id = 1")),
        "POINT (-122.164644615406 47.7869921906598)"
    );
    assert_eq!(
        text(&scalar(&mut s, "SELECT loc.STAsText() FROM g WHERE id = 2")),
        "POINT (1 2 3)"
    );
    // SRID 4326, version 1, a valid single point.
    let Value::Binary(b) = scalar(&mut s, "SELECT CAST(loc AS varbinary(max)) FROM g WHERE id = 1") else {
        panic!("not binary")
    };
    assert_eq!(&b[..6], &[0xE6, 0x10, 0, 0, 1, 0x0C]);
    exec(
        &mut s,
        "UPDATE g SET loc = CONVERT(geography, N'POINT (3 4)') WHERE id = 2",
    );
    assert_eq!(
        text(&scalar(&mut s, "SELECT loc.ToString() FROM g WHERE id = 2")),
        "POINT (3 4)"
    );
    let e = error(&mut s, "INSERT INTO g VALUES (3, N'POINTX (1 2)')");
    assert_eq!(e.number, 6522);
    assert!(e.message.contains("24114"), "{}", e.message);
    let e = error(&mut s, "INSERT INTO g VALUES (3, N'POINT (1 91)')");
    assert!(e.message.contains("24201"), "{}", e.message);
    // Shapes beyond a point: refused (SQL Server would store them), never stored differently.
    assert_eq!(
        error(&mut s, "INSERT INTO g VALUES (3, N'LINESTRING (1 2, 3 4)')").number,
        6522
    );
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM g"), Value::Int(2));
}
