//! The database servers a Migration may send its workers to.
//!
//! A worker pod receives the `username`/`password` keys of the Secrets its Migration names and logs in to the
//! hosts and ports the Migration names. Left open, whoever may create a Migration could point an endpoint at a
//! server of their own (PostgreSQL asks for a cleartext password when told to) and collect any Secret of the
//! namespace that has those keys. So the operator runs a Migration only when both endpoints are on the
//! allowlist the cluster admin gave it (`--allowed-endpoints`, the chart's `worker.allowedEndpoints`).
//!
//! An entry names hosts (exact names, `*.suffix` globs, or `*`), address ranges (CIDRs, which IP-literal hosts
//! must fall in) and the ports those may be reached on. Host names resolve when the worker connects, later and
//! elsewhere than this check: a name that is allowed can resolve to any address. The check here is the early,
//! readable refusal; the worker NetworkPolicy, built from the same entries' CIDRs, is what holds the address.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;

/// Ports of the default allowlist: SQL Server's and PostgreSQL's.
pub const STANDARD_PORTS: [u16; 2] = [1433, 5432];

/// A Migration's `host`, in the form it is compared in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// An IP literal (IPv4-mapped IPv6 addresses as their IPv4 address: that is where they connect).
    Ip(IpAddr),
    /// A DNS name, lower-cased, without a trailing dot.
    Name(String),
}

impl Host {
    /// `None` for anything a TCP connection would not go to as written: a Unix socket path, a port or an
    /// instance name inside the host, a zone id, a numeric form only some resolvers read as an address
    /// (`127.1`, `0x7f000001`).
    pub fn parse(host: &str) -> Option<Host> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Some(Host::Ip(ip.to_canonical()));
        }
        let name = host.strip_suffix('.').unwrap_or(host);
        let labels: Vec<&str> = name.split('.').collect();
        let valid_label = |l: &&str| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        let last = labels.last().copied().unwrap_or_default();
        let numeric = last.chars().all(|c| c.is_ascii_digit())
            || last.get(..2).is_some_and(|p| p.eq_ignore_ascii_case("0x"));
        if name.is_empty() || name.len() > 253 || !labels.iter().all(valid_label) || numeric {
            return None;
        }
        Some(Host::Name(name.to_ascii_lowercase()))
    }
}

/// One `hosts` entry of a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
enum HostPattern {
    /// `*`: every host, names and addresses.
    Any,
    /// `*.example.com`, kept as `.example.com`: names below it, not `example.com` itself.
    Below(String),
    Exact(Host),
}

impl HostPattern {
    fn parse(pattern: &str) -> Result<Self, String> {
        if pattern == "*" {
            return Ok(HostPattern::Any);
        }
        if let Some(suffix) = pattern.strip_prefix("*.") {
            return match Host::parse(suffix) {
                Some(Host::Name(name)) => Ok(HostPattern::Below(format!(".{name}"))),
                _ => Err(format!("{pattern:?}: *. must be followed by a DNS name")),
            };
        }
        if pattern.contains('/') {
            return Err(format!("{pattern:?} is a CIDR: list it under cidrs"));
        }
        Host::parse(pattern)
            .map(HostPattern::Exact)
            .ok_or_else(|| format!("{pattern:?} is not `*`, `*.domain`, a DNS name or an IP address"))
    }

    fn matches(&self, host: &Host) -> bool {
        match (self, host) {
            (HostPattern::Any, _) => true,
            (HostPattern::Below(suffix), Host::Name(name)) => name.ends_with(suffix.as_str()),
            (HostPattern::Below(_), Host::Ip(_)) => false,
            (HostPattern::Exact(exact), host) => exact == host,
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Any => f.write_str("any host"),
            HostPattern::Below(suffix) => write!(f, "*{suffix}"),
            HostPattern::Exact(Host::Name(name)) => f.write_str(name),
            HostPattern::Exact(Host::Ip(ip)) => write!(f, "{ip}"),
        }
    }
}

/// One entry: these hosts and addresses, on these ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointRule {
    hosts: Vec<HostPattern>,
    cidrs: Vec<IpNet>,
    ports: Vec<u16>,
}

impl EndpointRule {
    fn matches_host(&self, host: &Host) -> bool {
        self.hosts.iter().any(|p| p.matches(host))
            || matches!(host, Host::Ip(ip) if self.cidrs.iter().any(|c| c.contains(ip)))
    }

    fn describe_hosts(&self) -> Vec<String> {
        let hosts = self.hosts.iter().map(ToString::to_string);
        hosts.chain(self.cidrs.iter().map(ToString::to_string)).collect()
    }
}

/// The entry as the chart renders it into `MSSQLPG_ALLOWED_ENDPOINTS` (JSON).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    #[serde(default)]
    hosts: Vec<String>,
    #[serde(default)]
    cidrs: Vec<String>,
    ports: Vec<u16>,
}

/// Why an endpoint was refused; the caller names the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointRefusal {
    /// The host is not a name or address a worker would connect to as written.
    NotAHost,
    /// No entry covers the host; the text lists what the entries allow.
    Host(String),
    /// Entries cover the host but not the port; these are the ports they allow it.
    Port(Vec<u16>),
}

/// Every entry the operator was given, in order. An empty list allows nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointAllowlist {
    rules: Vec<EndpointRule>,
}

impl Default for EndpointAllowlist {
    /// The chart's default: any host, on SQL Server's and PostgreSQL's standard ports. Not safe to give to
    /// tenants (a server of their own on 5432 collects the credentials); it keeps a new install working
    /// until the admin lists the real servers.
    fn default() -> Self {
        Self {
            rules: vec![EndpointRule {
                hosts: vec![HostPattern::Any],
                cidrs: Vec::new(),
                ports: STANDARD_PORTS.to_vec(),
            }],
        }
    }
}

impl EndpointAllowlist {
    /// Reads the JSON list the chart renders (`[{"hosts": [...], "cidrs": [...], "ports": [...]}]`); an error
    /// names the entry and the value, e.g. `[1].cidrs[0]: "10.0.0.1/8" has host bits set`.
    pub fn from_json(json: &str) -> Result<Self, String> {
        let specs: Vec<RuleSpec> = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let mut rules = Vec::with_capacity(specs.len());
        for (i, spec) in specs.into_iter().enumerate() {
            let hosts = spec
                .hosts
                .iter()
                .enumerate()
                .map(|(j, h)| HostPattern::parse(h).map_err(|e| format!("[{i}].hosts[{j}]: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            let cidrs = spec
                .cidrs
                .iter()
                .enumerate()
                .map(|(j, c)| parse_cidr(c).map_err(|e| format!("[{i}].cidrs[{j}]: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            if hosts.is_empty() && cidrs.is_empty() {
                return Err(format!("[{i}]: names no hosts and no cidrs"));
            }
            if spec.ports.is_empty() || spec.ports.contains(&0) {
                return Err(format!("[{i}].ports: one or more ports from 1 to 65535"));
            }
            rules.push(EndpointRule {
                hosts,
                cidrs,
                ports: spec.ports,
            });
        }
        Ok(Self { rules })
    }

    /// An entry lets any host through (`*`): fine for a cluster where only its admins create Migrations.
    pub fn allows_any_host(&self) -> bool {
        self.rules.iter().any(|r| r.hosts.contains(&HostPattern::Any))
    }

    /// `Ok` when some entry covers both the host and the port.
    pub fn check(&self, host: &str, port: i32) -> Result<(), EndpointRefusal> {
        let host = Host::parse(host).ok_or(EndpointRefusal::NotAHost)?;
        let covering: Vec<&EndpointRule> = self.rules.iter().filter(|r| r.matches_host(&host)).collect();
        if covering.is_empty() {
            return Err(EndpointRefusal::Host(self.describe_hosts()));
        }
        if covering
            .iter()
            .any(|r| u16::try_from(port).is_ok_and(|p| r.ports.contains(&p)))
        {
            return Ok(());
        }
        let mut ports: Vec<u16> = covering.iter().flat_map(|r| r.ports.iter().copied()).collect();
        ports.sort_unstable();
        ports.dedup();
        Err(EndpointRefusal::Port(ports))
    }

    /// What the entries allow, for a refusal: `*.db.example, 10.20.0.0/16` (or `no host` when empty).
    fn describe_hosts(&self) -> String {
        let all: Vec<String> = self.rules.iter().flat_map(EndpointRule::describe_hosts).collect();
        if all.is_empty() {
            "no host (the allowlist is empty)".to_string()
        } else {
            all.join(", ")
        }
    }
}

/// A CIDR as Kubernetes' `ipBlock` takes it: a prefix length, and no address bits below it (the
/// NetworkPolicy and this check must mean the same range).
fn parse_cidr(cidr: &str) -> Result<IpNet, String> {
    let net: IpNet = cidr
        .parse()
        .map_err(|_| format!("{cidr:?} is not a CIDR (address/prefix length)"))?;
    if net.trunc() != net {
        return Err(format!(
            "{cidr:?} has host bits set; the range is {}",
            net.trunc()
        ));
    }
    Ok(net)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowlist(json: &str) -> EndpointAllowlist {
        EndpointAllowlist::from_json(json).unwrap()
    }

    #[test]
    fn hosts_are_names_or_addresses_a_tcp_connect_takes_as_written() {
        assert_eq!(
            Host::parse("SQL.Example.com."),
            Some(Host::Name("sql.example.com".into()))
        );
        assert_eq!(
            Host::parse("10.0.0.5"),
            Some(Host::Ip("10.0.0.5".parse().unwrap()))
        );
        assert_eq!(
            Host::parse("::ffff:10.0.0.5"),
            Some(Host::Ip("10.0.0.5".parse().unwrap()))
        );
        assert_eq!(Host::parse("fd00::1"), Some(Host::Ip("fd00::1".parse().unwrap())));
        for bad in [
            "/var/run/postgresql",
            "sql.example:53",
            "sql.example,53",
            "sql\\instance",
            "fe80::1%eth0",
            "127.1",
            "0x7f000001",
            "10.0.0.5.",
            "-sql.example",
            "a..b",
            "",
            "some one",
        ] {
            assert_eq!(Host::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_endpoint_passes_only_with_its_host_and_port_in_one_entry() {
        let list = allowlist(
            r#"[{"hosts": ["*.db.example", "pg.other.example"], "ports": [5432]},
                {"cidrs": ["10.20.0.0/16"], "ports": [1433]}]"#,
        );
        assert_eq!(list.check("orders.db.example", 5432), Ok(()));
        assert_eq!(list.check("ORDERS.DB.EXAMPLE.", 5432), Ok(()));
        assert_eq!(list.check("pg.other.example", 5432), Ok(()));
        assert_eq!(list.check("10.20.3.4", 1433), Ok(()));
        // The glob is below the domain, not the domain itself, and not a name that merely ends alike.
        assert!(matches!(
            list.check("db.example", 5432),
            Err(EndpointRefusal::Host(_))
        ));
        assert!(matches!(
            list.check("evildb.example", 5432),
            Err(EndpointRefusal::Host(_))
        ));
        // An allowed host on a port another entry allows is still refused: entries pair hosts with ports.
        assert_eq!(
            list.check("orders.db.example", 53),
            Err(EndpointRefusal::Port(vec![5432]))
        );
        assert_eq!(
            list.check("orders.db.example", 1433),
            Err(EndpointRefusal::Port(vec![5432]))
        );
        assert_eq!(
            list.check("10.20.3.4", 5432),
            Err(EndpointRefusal::Port(vec![1433]))
        );
        // Names never match CIDRs: where a name resolves is decided later, elsewhere.
        match list.check("someone.else", 5432) {
            Err(EndpointRefusal::Host(allowed)) => {
                assert_eq!(allowed, "*.db.example, pg.other.example, 10.20.0.0/16")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            list.check("10.21.0.1", 1433),
            Err(EndpointRefusal::Host(_))
        ));
        assert_eq!(
            list.check("/tmp/.s.PGSQL.5432", 5432),
            Err(EndpointRefusal::NotAHost)
        );
    }

    #[test]
    fn the_default_is_any_host_on_the_standard_ports() {
        let list = EndpointAllowlist::default();
        assert!(list.allows_any_host());
        assert_eq!(list.check("anything.example", 1433), Ok(()));
        assert_eq!(list.check("192.0.2.1", 5432), Ok(()));
        assert_eq!(
            list.check("kube-dns.kube-system.svc.cluster.local", 53),
            Err(EndpointRefusal::Port(vec![1433, 5432]))
        );
        assert_eq!(
            list.check("kubernetes.default.svc", 443),
            Err(EndpointRefusal::Port(vec![1433, 5432]))
        );
        assert_eq!(allowlist(r#"[{"hosts": ["*"], "ports": [1433, 5432]}]"#), list);
        let empty = allowlist("[]");
        assert!(
            matches!(empty.check("sql.example", 1433), Err(EndpointRefusal::Host(t)) if t.contains("empty"))
        );
    }

    #[test]
    fn a_malformed_entry_is_named() {
        let err = |json: &str| EndpointAllowlist::from_json(json).unwrap_err();
        assert_eq!(
            err(r#"[{"hosts": ["*"], "ports": [1433]}, {"cidrs": ["10.0.0.1/8"], "ports": [1433]}]"#),
            "[1].cidrs[0]: \"10.0.0.1/8\" has host bits set; the range is 10.0.0.0/8"
        );
        assert!(err(r#"[{"cidrs": ["10.0.0.1"], "ports": [1]}]"#).starts_with("[0].cidrs[0]"));
        assert!(err(r#"[{"hosts": ["10.0.0.0/8"], "ports": [1]}]"#).contains("list it under cidrs"));
        assert!(err(r#"[{"hosts": ["*db.example"], "ports": [1]}]"#).starts_with("[0].hosts[0]"));
        assert!(err(r#"[{"hosts": ["*.10.0.0.1"], "ports": [1]}]"#).starts_with("[0].hosts[0]"));
        assert_eq!(err(r#"[{"ports": [1433]}]"#), "[0]: names no hosts and no cidrs");
        assert!(err(r#"[{"hosts": ["a.example"], "ports": []}]"#).starts_with("[0].ports"));
        assert!(err(r#"[{"hosts": ["a.example"], "ports": [70000]}]"#).contains("70000"));
        assert!(err(r#"[{"host": "a.example", "ports": [1]}]"#).contains("unknown field"));
    }
}
