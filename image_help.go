package main

// The help of `sbx image`, in both builds: the full sbx's command
// (image_cmd.go) and the lean sbx's, which hands it to the full one
// (image_lean.go), so that `sbx --help` lists the same either way.
const (
	imageName  = "image"
	imageUsage = "pull, import, list and remove the OCI images a run may use as its root"
	// imageDescription is `sbx image --help`'s text.
	imageDescription = "Images live unpacked, once per image, in a content-addressed store: /var/lib/sbx\n" +
		"as root, $XDG_DATA_HOME/sbx (~/.local/share/sbx) otherwise, SBX_HOME if set.\n" +
		"Run on one with 'sbx exec --image NAME task.py' or image = \"NAME\" in a profile."
)
