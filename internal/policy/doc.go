// Package policy is a node's policy for work its Hub delivers:
// configurations applied or validated through configuration commands and
// job specs of job commands. The node's owner writes it in the
// remote_policy section of the node's own --config file; a Hub-delivered
// document may not hold that section.
//
// The policy decides four things, each refusal a [Denial] naming the path
// in the delivered document and the rule (remote_policy.<field>) that
// refused it, reported with the code [Code]:
//
//   - which references may resolve: ${secret:NAME} the Hub resolved, and
//     node-local ones only when listed; ${env:} and ${file:} only when
//     listed ([Policy.Document], before anything resolves);
//   - which files components may read and write: beneath the allowed
//     roots, checked through [os.Root] so that ".." and symbolic links
//     cannot leave a root ([Within]);
//   - which destinations components may connect to: not link-local or
//     cloud metadata addresses, and only the allow-list when one is set
//     ([Policy.Destination], host names resolved first);
//   - whether job and configuration commands run at all.
//
// Local configuration files are not checked: the node's owner wrote them.
// This package decides; it must not log, resolve references, or keep
// resolved values.
package policy
