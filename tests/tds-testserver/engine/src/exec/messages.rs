//! PRINT, RAISERROR and THROW: messages and errors a batch raises itself.

use crate::error::SqlError;
use crate::query;
use crate::results::Fail;
use crate::results::ResultSink;
use crate::state::State;
use rusqlite::types::Value as Stored;
use sqlparser::ast::Expr;

/// `PRINT expr`: the value as an informational message.
pub(crate) fn print(
    cx: &mut State,
    p: sqlparser::ast::PrintStatement,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let v = query::eval_scalar(cx, p.message.as_ref().clone())?;
    let text = match v {
        Stored::Null => String::new(),
        Stored::Integer(i) => i.to_string(),
        Stored::Real(f) => crate::convert::format_float(f),
        Stored::Text(t) => t,
        Stored::Blob(b) => String::from_utf8_lossy(&b).into_owned(),
    };
    sink.info(0, &text)?;
    Ok(())
}

/// RAISERROR and THROW: a user error (50000 for a message text, or THROW's number) with
/// the given severity and state; severity 10 or less is an informational message.
pub(crate) fn raise(
    cx: &mut State,
    throw: bool,
    args: Vec<Expr>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    if args.is_empty() {
        return Err(SqlError::new(
            10704,
            15,
            "To rethrow an error, a THROW statement must be used inside a CATCH block. Insert the THROW statement inside a CATCH block, or add error parameters to the THROW statement.",
        )
        .into());
    }
    let mut values = Vec::with_capacity(args.len());
    for a in args {
        values.push(query::eval_scalar(cx, a)?);
    }
    let int = |v: &Stored| match v {
        Stored::Integer(i) => Some(*i),
        Stored::Real(f) => Some(*f as i64),
        Stored::Text(t) => t.trim().parse::<i64>().ok(),
        _ => None,
    };
    let text = |v: &Stored| match v {
        Stored::Null => "(null)".to_string(),
        Stored::Integer(i) => i.to_string(),
        Stored::Real(f) => crate::convert::format_float(*f),
        Stored::Text(t) => t.clone(),
        Stored::Blob(b) => String::from_utf8_lossy(b).into_owned(),
    };
    let state_of = |v: &Stored| int(v).unwrap_or(1).clamp(0, 255) as u8;
    if throw {
        let number = int(&values[0]).unwrap_or(0);
        if !(50000..=i64::from(i32::MAX)).contains(&number) {
            return Err(SqlError::new(
                35100,
                16,
                format!("Error number {number} in the THROW statement is outside the valid range. Specify an error number in the valid range of 50000 to 2147483647."),
            )
            .into());
        }
        let mut e = SqlError::new(number as i32, 16, text(&values[1]));
        e.state = state_of(&values[2]);
        return Err(e.into());
    }
    let severity = int(&values[1]).unwrap_or(16).clamp(0, 25) as u8;
    let state = state_of(&values[2]);
    let (number, message) = match &values[0] {
        Stored::Text(fmt) => (50000, format_raiserror(fmt, &values[3..])),
        other => {
            let n = int(other).unwrap_or(0);
            (
                18054,
                format!(
                    "Error {n}, severity {severity}, state {state} was raised, but no message with this error number was found in sys.messages. If error is larger than 50000, make sure the user-defined message is added using sp_addmessage."
                ),
            )
        }
    };
    if severity <= 10 && number == 50000 {
        sink.info(number, &message)?;
        return Ok(());
    }
    let mut e = SqlError::new(number, if number == 50000 { severity } else { 16 }, message);
    e.state = state;
    Err(e.into())
}

/// RAISERROR's printf-like message: `%d %i %u %s %x %X %o` with optional flags, width and
/// precision (`%5d`, `%-10s`, `%.3s`, `%I64d`), `%%` for a percent sign.
fn format_raiserror(fmt: &str, args: &[Stored]) -> String {
    let mut out = String::with_capacity(fmt.len());
    let mut args = args.iter();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        let mut left = false;
        let mut zero = false;
        while let Some(&f) = chars.peek() {
            match f {
                '-' => left = true,
                '0' => zero = true,
                '+' | ' ' | '#' => {}
                _ => break,
            }
            chars.next();
        }
        let mut width = String::new();
        while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(d);
            chars.next();
        }
        let mut precision: Option<usize> = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut p = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                p.push(d);
                chars.next();
            }
            precision = p.parse().ok();
        }
        for size in ["I64", "h", "l"] {
            if chars.clone().take(size.len()).collect::<String>() == size {
                for _ in 0..size.len() {
                    chars.next();
                }
            }
        }
        let Some(kind) = chars.next() else { break };
        let arg = args.next();
        let mut piece = match (kind, arg) {
            (_, None | Some(Stored::Null)) => "(null)".to_string(),
            ('d' | 'i' | 'u', Some(v)) => match v {
                Stored::Integer(i) => i.to_string(),
                Stored::Real(f) => (*f as i64).to_string(),
                Stored::Text(t) => t.clone(),
                Stored::Blob(_) => String::new(),
                Stored::Null => String::new(),
            },
            ('x' | 'X' | 'o', Some(Stored::Integer(i))) => match kind {
                'x' => format!("{:x}", *i as u32),
                'X' => format!("{:X}", *i as u32),
                _ => format!("{:o}", *i as u32),
            },
            (_, Some(Stored::Integer(i))) => i.to_string(),
            (_, Some(Stored::Real(f))) => crate::convert::format_float(*f),
            (_, Some(Stored::Text(t))) => t.clone(),
            (_, Some(Stored::Blob(b))) => String::from_utf8_lossy(b).into_owned(),
        };
        if let Some(p) = precision.filter(|_| kind == 's') {
            piece = piece.chars().take(p).collect();
        }
        let width: usize = width.parse().unwrap_or(0);
        let pad = width.saturating_sub(piece.chars().count());
        if left {
            piece.extend(std::iter::repeat_n(' ', pad));
        } else {
            let fill = if zero && kind != 's' { "0" } else { " " };
            piece = format!("{}{piece}", fill.repeat(pad));
        }
        out.push_str(&piece);
    }
    out
}
