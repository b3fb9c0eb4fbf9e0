// Package secretscan finds credentials in what a sandbox would be given:
// the files of an image's rootfs, the files and environment of an image
// spec, the environment a backend starts a sandbox with, and the files of
// a checkpoint (a base snapshot's saved memory and kernel state).
//
// It owns:
//
//   - the rules (rules.go): private keys (PEM and OpenSSH blocks with a
//     body, PuTTY key files), AWS access key IDs with a secret key
//     nearby, GCP service-account JSON, Azure storage and Service Bus
//     connection strings, GitHub, GitLab, Slack and Stripe-style tokens,
//     JWTs whose header decodes to a JSON object with "alg", Airlock's own
//     API keys (alk_ and e2b_ formats), and, in text only, assignments of
//     a high-entropy value to a name ending in SECRET, TOKEN, PASSWORD,
//     API_KEY and the like;
//   - the exact values the host holds (Known): the broker's credentials
//     and airlockd's own keys, matched raw and in hex and base64, in every
//     file whatever its content. This is the strongest check and no
//     allow-list applies to it;
//   - the allow-list (allow.go): paths of the stock Debian images that
//     hold test keys or look-alikes, each with the reason found when the
//     real images were scanned; an allowed finding is reported as allowed,
//     never dropped;
//   - the bounds of a scan: a size cap per file (a larger file is listed
//     as skipped), regular files only, no symlink followed, each inode
//     read once, the caller's context for time.
//
// A Finding never holds the secret: it names the file (with line and
// byte offset) or the variable, the rule and a masked excerpt that keeps
// only the part of the match that is not secret (a token's public prefix,
// a PEM block's label, an assignment's name).
//
// The rules are written here rather than taken from a general secret
// scanner: those bring rule sets tuned for source repositories (hundreds
// of rules, many false positives on a Debian rootfs) and large dependency
// trees, and none matches the host's own secret values in binary files.
//
// It must not touch anything it scans: it only reads, never follows a
// symlink out of the tree it was given, and never logs or returns a
// secret value. It knows nothing of images, snapshots or the broker: the
// callers (package image, package provision, the commands) decide what
// to scan and what a finding means.
package secretscan
