// Package deploy holds no code: it is the home of Airlock's deployment
// files and of the test that checks them.
//
//   - systemd/: units for plain hosts: airlockd.service (a node),
//     airlock-etcd.service (an etcd member), a drop-in for Debian's
//     postgresql@.service, and example environment files.
//   - kubernetes/: manifests: the airlockd DaemonSet on hosts labelled
//     airlock.dev/sandbox-host=true (privileged, and why, in its comments),
//     etcd as a three-member StatefulSet with a headless Service,
//     PostgreSQL as a StatefulSet (or external/ for one outside the
//     cluster), the ConfigMap and Secrets of the nodes' settings.
//
// deploy_test.go decodes every manifest strictly into the Kubernetes API
// type of its kind (an unknown or misspelt field fails), checks the
// invariants the nodes rely on (images, resources, the node selector,
// probes on the paths airlockd serves, flags and variables airlockd
// knows), and checks the units with systemd-analyze verify where it is
// installed and with a parser of known keys everywhere.
package deploy
