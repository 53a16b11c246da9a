// Package deploy holds no code: it is the home of the deployment files
// (systemd/, kubernetes/, haproxy/, nginx/) and of the tests that check
// them offline: systemd-analyze verify on the units, and every Kubernetes
// manifest decoded strictly into the k8s.io/api types with its invariants.
package deploy
