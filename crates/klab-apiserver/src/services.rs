//! Service IP and port allocation, as the API server's service registry does it: a ClusterIP
//! from the service CIDR (`--service-cluster-ip-range`, 10.96.0.0/12 as kubeadm and kind set
//! it) and node ports from `--service-node-port-range` (30000-32767). Requested values are
//! checked against the range and against what other Services hold; free values are drawn at
//! random from the upper part of each range first (upstream's static/dynamic split keeps the
//! lower band for values users pick). What is allocated is read from the stored Services, so a
//! deleted Service frees its values; one lock around allocate-and-store keeps two creates from
//! taking the same value.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde_json::{Value, json};

use klab_api::DetRng;

use crate::object::Pointer;
use crate::validation::FieldError;

/// The service CIDR: network address and prefix length.
pub const SERVICE_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 12);
/// The `kubernetes` Service's address: the first of the range.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
/// `--service-node-port-range`.
pub const NODE_PORT_RANGE: (i64, i64) = (30000, 32767);

fn cidr_string() -> String {
    format!("{}/{}", SERVICE_CIDR.0, SERVICE_CIDR.1)
}

/// Addresses of the range as offsets from the network address: [1, size - 1) (no network or
/// broadcast address).
fn range_size() -> u64 {
    1u64 << (32 - u32::from(SERVICE_CIDR.1))
}

fn offset_of(ip: Ipv4Addr) -> Option<u64> {
    let base = u32::from(SERVICE_CIDR.0);
    let v = u32::from(ip);
    let off = u64::from(v.checked_sub(base)?);
    (off >= 1 && off < range_size().saturating_sub(1)).then_some(off)
}

/// Upstream's static band: `min(max(16, size/16), 256)` low addresses for users to request.
fn static_band(size: u64, div: u64, cap: u64) -> u64 {
    (size / div).clamp(16, cap)
}

/// Picks a free value in `[lo, hi)`, from the dynamic band `[split, hi)` first; `None` when full.
fn pick(rng: &DetRng, lo: u64, split: u64, hi: u64, used: &dyn Fn(u64) -> bool) -> Option<u64> {
    for (a, b) in [(split, hi), (lo, split)] {
        if a >= b {
            continue;
        }
        // A random start, then the next free one (wrapping): fair enough and always terminates.
        let start = rng.range(a, b);
        let n = b - a;
        for i in 0..n {
            let v = a + (start - a + i) % n;
            if !used(v) {
                return Some(v);
            }
        }
    }
    None
}

/// What other Services hold: cluster IPs and node ports.
#[derive(Default)]
pub struct InUse {
    pub ips: BTreeSet<Ipv4Addr>,
    pub node_ports: BTreeSet<i64>,
}

impl InUse {
    /// From stored Services, skipping the one being written (`namespace/name`).
    pub fn from_services<'a>(
        svcs: impl Iterator<Item = &'a Value>,
        skip: Option<(&str, &str)>,
    ) -> Self {
        let mut u = InUse::default();
        for s in svcs {
            let ns = s
                .at("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            let name = s.at("/metadata/name").and_then(Value::as_str).unwrap_or("");
            if skip == Some((ns, name)) {
                continue;
            }
            for ip in cluster_ips(s) {
                if let Ok(a) = ip.parse() {
                    u.ips.insert(a);
                }
            }
            for p in ports(s) {
                if let Some(np) = p
                    .get("nodePort")
                    .and_then(Value::as_i64)
                    .filter(|n| *n != 0)
                {
                    u.node_ports.insert(np);
                }
            }
        }
        u
    }
}

fn cluster_ips(s: &Value) -> Vec<String> {
    let mut v: Vec<String> = s
        .at("/spec/clusterIPs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if v.is_empty()
        && let Some(ip) = s.at("/spec/clusterIP").and_then(Value::as_str)
        && !ip.is_empty()
    {
        v.push(ip.to_string());
    }
    v
}

fn ports(s: &Value) -> Vec<Value> {
    s.at("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn ty(s: &Value) -> &str {
    s.at("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

fn needs_node_ports(t: &str) -> bool {
    matches!(t, "NodePort" | "LoadBalancer")
}

/// Fills `spec.clusterIP(s)`, `ipFamilies`, `ipFamilyPolicy` and node ports of a Service being
/// created or updated (`old` on update: its values are kept when the new object omits them, as
/// `kubectl replace` and `apply` do). Errors are upstream's allocator errors.
pub fn allocate(
    svc: &mut Value,
    old: Option<&Value>,
    in_use: &InUse,
    rng: &DetRng,
) -> Result<(), Vec<FieldError>> {
    let mut errs = Vec::new();
    let t = ty(svc).to_string();
    if !svc.get("spec").is_some_and(Value::is_object) {
        svc["spec"] = json!({});
    }
    if t == "ExternalName" {
        return Ok(());
    }
    // Cluster IP: kept from the old object when omitted.
    let mut ip = svc
        .at("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if ip.is_empty()
        && let Some(first) = svc.at("/spec/clusterIPs/0").and_then(Value::as_str)
    {
        ip = first.to_string();
    }
    let old_ip = old
        .filter(|o| ty(o) != "ExternalName")
        .and_then(|o| cluster_ips(o).into_iter().next());
    if ip.is_empty()
        && let Some(o) = &old_ip
    {
        ip = o.clone();
    }
    let unchanged = old_ip.as_deref() == Some(ip.as_str());
    if ip.is_empty() {
        let size = range_size();
        let split = static_band(size, 16, 256);
        let used = |off: u64| {
            let a = Ipv4Addr::from(u32::from(SERVICE_CIDR.0).wrapping_add(off as u32));
            in_use.ips.contains(&a)
        };
        match pick(rng, 1, split, size.saturating_sub(1), &used) {
            Some(off) => {
                ip = Ipv4Addr::from(u32::from(SERVICE_CIDR.0).wrapping_add(off as u32)).to_string();
            }
            None => errs.push(FieldError::invalid(
                "spec.clusterIPs",
                json!([]),
                "failed to allocate a serviceIP: range is full",
            )),
        }
    } else if ip != "None" && !unchanged {
        match ip.parse::<Ipv4Addr>() {
            Err(_) => errs.push(FieldError::invalid(
                "spec.clusterIPs[0]",
                json!(ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            )),
            Ok(a) if offset_of(a).is_none() => errs.push(FieldError::invalid(
                "spec.clusterIPs",
                json!([ip]),
                format!(
                    "failed to allocate IP {ip}: provided IP is not in the valid range. The range of valid IPs is {}",
                    cidr_string()
                ),
            )),
            Ok(a) if in_use.ips.contains(&a) => errs.push(FieldError::invalid(
                "spec.clusterIPs",
                json!([ip]),
                format!("failed to allocate IP {ip}: provided IP is already allocated"),
            )),
            Ok(_) => {}
        }
    }
    if let Some(o) = &old_ip
        && !ip.is_empty()
        && *o != ip
    {
        errs.push(FieldError::invalid(
            "spec.clusterIPs[0]",
            json!(ip),
            "may not change once set",
        ));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let spec = &mut svc["spec"];
    spec["clusterIP"] = json!(ip);
    spec["clusterIPs"] = json!([ip]);
    if ip != "None" || spec.get("selector").is_some_and(|s| !s.is_null()) {
        if spec.get("ipFamilies").is_none_or(Value::is_null) {
            spec["ipFamilies"] = json!(["IPv4"]);
        }
        if spec.get("ipFamilyPolicy").is_none_or(Value::is_null) {
            spec["ipFamilyPolicy"] = json!("SingleStack");
        }
    }

    // Node ports.
    if !needs_node_ports(&t) {
        return Ok(());
    }
    let old_ports = old
        .filter(|o| needs_node_ports(ty(o)))
        .map(ports)
        .unwrap_or_default();
    let old_node_port = |p: &Value| -> Option<i64> {
        old_ports
            .iter()
            .find(|o| o.get("port") == p.get("port") && o.get("protocol") == p.get("protocol"))
            .and_then(|o| o.get("nodePort").and_then(Value::as_i64))
            .filter(|n| *n != 0)
    };
    let mut taken: BTreeSet<i64> = BTreeSet::new();
    let Some(list) = svc.at_mut("/spec/ports").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    // Requested ports first, so that a drawn port never takes one requested later in the list.
    for (i, p) in list.iter_mut().enumerate() {
        let mut np = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if np == 0
            && let Some(o) = old_node_port(p)
        {
            np = o;
            p["nodePort"] = json!(o);
        }
        if np == 0 {
            continue;
        }
        let kept = old_ports
            .iter()
            .any(|o| o.get("nodePort").and_then(Value::as_i64) == Some(np));
        let path = format!("spec.ports[{i}].nodePort");
        if !(NODE_PORT_RANGE.0..=NODE_PORT_RANGE.1).contains(&np) {
            errs.push(FieldError::invalid(
                path.as_str(),
                json!(np),
                format!(
                    "provided port is not in the valid range. The range of valid ports is {}-{}",
                    NODE_PORT_RANGE.0, NODE_PORT_RANGE.1
                ),
            ));
        } else if !kept && in_use.node_ports.contains(&np) {
            errs.push(FieldError::invalid(
                path.as_str(),
                json!(np),
                "provided port is already allocated",
            ));
        }
        taken.insert(np);
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let (lo, hi) = (NODE_PORT_RANGE.0 as u64, NODE_PORT_RANGE.1 as u64 + 1);
    let split = lo + static_band(hi - lo, 32, 128);
    for p in list.iter_mut() {
        if p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
            continue;
        }
        let used = |v: u64| {
            let v = v as i64;
            in_use.node_ports.contains(&v) || taken.contains(&v)
        };
        match pick(rng, lo, split, hi, &used) {
            Some(v) => {
                taken.insert(v as i64);
                p["nodePort"] = json!(v);
            }
            None => {
                return Err(vec![FieldError::invalid(
                    "spec.ports",
                    json!([]),
                    "failed to allocate a nodePort: range is full",
                )]);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec})
    }

    #[test]
    fn cluster_ips_come_from_the_dynamic_band_and_requests_are_checked() {
        let rng = DetRng::seeded(1);
        let mut s = svc(json!({"type": "ClusterIP", "ports": [{"port": 80}]}));
        allocate(&mut s, None, &InUse::default(), &rng).unwrap();
        let ip: Ipv4Addr = s["spec"]["clusterIP"].as_str().unwrap().parse().unwrap();
        let off = offset_of(ip).unwrap();
        assert!(off >= 256, "{ip} is in the static band");
        assert_eq!(s["spec"]["clusterIPs"], json!([ip.to_string()]));
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv4"]));
        assert_eq!(s["spec"]["ipFamilyPolicy"], json!("SingleStack"));

        let used = InUse::from_services([&s].into_iter(), None);
        let mut dup = svc(json!({"clusterIP": ip.to_string(), "ports": [{"port": 80}]}));
        let errs = allocate(&mut dup, None, &used, &rng).unwrap_err();
        assert_eq!(
            errs[0].message(),
            format!(
                "spec.clusterIPs: Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated"
            )
        );
        let mut out = svc(json!({"clusterIP": "10.0.0.5", "ports": [{"port": 80}]}));
        let errs = allocate(&mut out, None, &used, &rng).unwrap_err();
        assert_eq!(
            errs[0].message(),
            "spec.clusterIPs: Invalid value: []string{\"10.0.0.5\"}: failed to allocate IP 10.0.0.5: provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        );
        let mut bad = svc(json!({"clusterIP": "ten", "ports": [{"port": 80}]}));
        let errs = allocate(&mut bad, None, &used, &rng).unwrap_err();
        assert_eq!(
            errs[0].message(),
            "spec.clusterIPs[0]: Invalid value: \"ten\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
        );
        // Headless.
        let mut h = svc(json!({"clusterIP": "None", "selector": {"app": "web"}}));
        allocate(&mut h, None, &used, &rng).unwrap();
        assert_eq!(h["spec"]["clusterIPs"], json!(["None"]));
    }

    #[test]
    fn updates_keep_and_protect_allocated_values() {
        let rng = DetRng::seeded(2);
        let mut old = svc(json!({"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}]}));
        allocate(&mut old, None, &InUse::default(), &rng).unwrap();
        let np = old["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        assert!((30086..=32767).contains(&np), "{np}");
        // A replace without the allocated values keeps them.
        let mut new = svc(json!({"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}]}));
        let others = InUse::from_services([&old].into_iter(), Some(("default", "web")));
        allocate(&mut new, Some(&old), &others, &rng).unwrap();
        assert_eq!(new["spec"]["clusterIP"], old["spec"]["clusterIP"]);
        assert_eq!(new["spec"]["ports"][0]["nodePort"], json!(np));
        // Changing the cluster IP is refused.
        let mut moved = new.clone();
        moved["spec"]["clusterIP"] = json!("10.96.0.77");
        moved["spec"]["clusterIPs"] = json!(["10.96.0.77"]);
        let errs = allocate(&mut moved, Some(&old), &others, &rng).unwrap_err();
        assert_eq!(
            errs.last().unwrap().message(),
            "spec.clusterIPs[0]: Invalid value: \"10.96.0.77\": may not change once set"
        );
    }

    #[test]
    fn node_ports_are_checked_against_the_range_and_other_services() {
        let rng = DetRng::seeded(3);
        let mut a = svc(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}));
        allocate(&mut a, None, &InUse::default(), &rng).unwrap();
        assert_eq!(a["spec"]["ports"][0]["nodePort"], json!(30080));
        let used = InUse::from_services([&a].into_iter(), None);
        let mut b = svc(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}));
        let errs = allocate(&mut b, None, &used, &rng).unwrap_err();
        assert_eq!(
            errs[0].message(),
            "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
        );
        let mut c = svc(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 40000}]}));
        let errs = allocate(&mut c, None, &used, &rng).unwrap_err();
        assert_eq!(
            errs[0].message(),
            "spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. The range of valid ports is 30000-32767"
        );
    }
}
