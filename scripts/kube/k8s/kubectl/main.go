// kubectl for moco-rs's tests: the upstream command from k8s.io/kubectl, linked in the
// wrapper module that scripts/kube/build.sh generates. The cloud providers' credential
// plugins are left out: the tests log in with certificates and tokens.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// -v=N must take effect before the command is built, as upstream's kubectl does.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) //nolint:errcheck // as upstream: nothing to do on failure
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
