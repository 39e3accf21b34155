use std::collections::HashMap;

use super::*;

/// A resolver answering from a table; any other name fails as an unknown host would.
pub(crate) struct Table(pub HashMap<String, Vec<IpAddr>>);

impl Table {
    pub(crate) fn of(entries: &[(&str, &[&str])]) -> Arc<Self> {
        let map = entries
            .iter()
            .map(|(name, ips)| {
                let ips = ips.iter().map(|ip| ip.parse().unwrap()).collect();
                (name.to_string(), ips)
            })
            .collect();
        Arc::new(Self(map))
    }
}

impl Resolve for Table {
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> BoxFuture<'a, io::Result<Vec<SocketAddr>>> {
        let found = self.0.get(host).map(|ips| {
            ips.iter()
                .map(|ip| SocketAddr::new(*ip, port))
                .collect::<Vec<_>>()
        });
        Box::pin(async move {
            found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "unknown host"))
        })
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn private_and_special_addresses_are_not_global() {
    let refused = [
        "0.0.0.0",
        "0.1.2.3",
        "10.0.0.1",
        "100.64.0.1",
        "100.127.255.254",
        "127.0.0.1",
        "127.0.0.2",
        "169.254.169.254",
        "172.16.0.1",
        "172.31.255.255",
        "192.0.0.1",
        "192.0.0.170",
        "192.0.2.1",
        "192.88.99.1",
        "192.168.1.1",
        "198.18.0.1",
        "198.19.255.255",
        "198.51.100.7",
        "203.0.113.9",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "168.63.129.16",
        "::",
        "::1",
        "::ffff:127.0.0.1",
        "::ffff:10.1.2.3",
        "::ffff:169.254.169.254",
        "::127.0.0.1",
        "::0.0.0.1",
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::1",
        "2002:7f00:1::",
        "2002:c0a8:101::1",
        // Teredo with a private server, and with the client 127.0.0.1 (inverted).
        "2001:0:a00:1::",
        "2001:0:808:808::80ff:fffe",
        "fc00::1",
        "fd00:ec2::254",
        "fe80::1",
        "fec0::1",
        "ff02::1",
        "100::1",
        "2001:db8::1",
        "2001:10::1",
        "3fff::1",
        "::2:3:4:5",
        "4000::1",
    ];
    for a in refused {
        assert!(!is_global(ip(a)), "{a} passed as global");
    }
}

#[test]
fn public_addresses_are_global() {
    let allowed = [
        "1.1.1.1",
        "8.8.8.8",
        "93.184.216.34",
        "100.63.255.255",
        "100.128.0.1",
        "172.15.255.255",
        "172.32.0.1",
        "192.0.1.1",
        "198.17.255.255",
        "198.20.0.1",
        "223.255.255.254",
        "168.63.129.17",
        "2606:4700:4700::1111",
        "2a00:1450:4001:80b::200e",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
        // Teredo: server 8.8.8.8, client 1.1.1.1 (inverted: fefe:fefe).
        "2001:0:808:808::fefe:fefe",
    ];
    for a in allowed {
        assert!(is_global(ip(a)), "{a} refused");
    }
}

#[test]
fn only_http_and_https_without_credentials() {
    assert!(check_url("https://example.com/a?b#c").is_ok());
    assert!(check_url("  http://example.com ").is_ok());
    for (url, why) in [
        ("ftp://example.com/f", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("gopher://example.com", "only http and https"),
        ("data:text/plain,hi", "only http and https"),
        ("http://user:pass@example.com/", "credentials"),
        ("http://user@example.com/", "credentials"),
        ("http://:pw@example.com/", "credentials"),
        ("not a url", "invalid URL"),
        ("http://", "invalid URL"),
    ] {
        let err = check_url(url).unwrap_err().to_string();
        assert!(err.contains(why), "{url}: {err}");
    }
}

#[test]
fn redirects_never_go_down_from_https() {
    let from = Url::parse("https://a.example/").unwrap();
    let down = Url::parse("http://a.example/x").unwrap();
    let err = check_hop(&from, &down).unwrap_err().to_string();
    assert!(err.contains("from https down to http"), "{err}");
    let up = Url::parse("https://b.example/").unwrap();
    assert!(check_hop(&Url::parse("http://a.example/").unwrap(), &up).is_ok());
    let ftp = Url::parse("ftp://b.example/").unwrap();
    assert!(check_hop(&from, &ftp).is_err());
}

/// Every way of spelling loopback a URL parser accepts is loopback to the guard.
#[tokio::test]
async fn loopback_in_every_spelling_is_denied() {
    let guard = Guard::with_resolver(false, Table::of(&[]));
    for (url, host) in [
        ("http://127.0.0.1/", "127.0.0.1"),
        ("http://127.0.0.2:8080/", "127.0.0.2"),
        ("http://0.0.0.0/", "0.0.0.0"),
        ("http://[::1]/", "[::1]"),
        ("http://[::ffff:127.0.0.1]/", "[::ffff:7f00:1]"),
        ("http://[0:0:0:0:0:ffff:7f00:1]/", "[::ffff:7f00:1]"),
        ("http://2130706433/", "127.0.0.1"),
        ("http://0177.1/", "127.0.0.1"),
        ("http://0x7f.1/", "127.0.0.1"),
        ("http://0x7f000001/", "127.0.0.1"),
        ("http://017700000001/", "127.0.0.1"),
        ("http://127.1/", "127.0.0.1"),
        ("http://0/", "0.0.0.0"),
        ("http://localhost/", "localhost"),
        ("http://localhost./", "localhost."),
        ("http://LOCALHOST:9/", "localhost"),
        ("http://api.localhost/", "api.localhost"),
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254",
        ),
        ("http://[fd00:ec2::254]/", "[fd00:ec2::254]"),
    ] {
        let parsed = check_url(url).unwrap();
        let err = guard.admit(&parsed).await.unwrap_err().to_string();
        assert_eq!(
            err,
            format!("Access denied: {host} resolves to a private address"),
            "{url}"
        );
    }
}

#[tokio::test]
async fn every_resolved_address_must_be_global() {
    let table = Table::of(&[
        ("public.test", &["93.184.216.34", "2606:2800:220:1::1"]),
        ("mixed.test", &["93.184.216.34", "10.0.0.5"]),
        ("rebind.test", &["8.8.8.8", "::ffff:127.0.0.1"]),
    ]);
    let guard = Guard::with_resolver(false, table.clone());
    let addrs = guard
        .admit(&check_url("https://public.test/").unwrap())
        .await
        .unwrap();
    assert_eq!(addrs.len(), 2);
    assert!(addrs.iter().all(|a| a.port() == 443));
    for name in ["mixed.test", "rebind.test"] {
        let err = guard
            .admit(&check_url(&format!("http://{name}/")).unwrap())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("Access denied: {name} resolves to a private address")
        );
    }
    let err = guard
        .admit(&check_url("http://unknown.test/").unwrap())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("cannot resolve unknown.test"),
        "{err}"
    );
}

#[tokio::test]
async fn allow_private_addresses_lifts_the_check_but_still_pins() {
    let table = Table::of(&[("mixed.test", &["93.184.216.34", "10.0.0.5"])]);
    let guard = Guard::with_resolver(true, table);
    let addrs = guard
        .admit(&check_url("http://mixed.test:81/").unwrap())
        .await
        .unwrap();
    assert_eq!(
        addrs,
        vec![
            "93.184.216.34:81".parse().unwrap(),
            "10.0.0.5:81".parse().unwrap()
        ]
    );
    let local = guard
        .admit(&check_url("http://2130706433:9/").unwrap())
        .await
        .unwrap();
    assert_eq!(local, vec!["127.0.0.1:9".parse().unwrap()]);
}
