package awsfn

import "strings"

// Roles are the three functions, in template order.
var Roles = []Role{RoleCompactor, RoleCleaner, RoleSweeper}

// FunctionLogicalID is the template's logical id of role's function.
func FunctionLogicalID(role Role) string {
	s := string(role)
	return strings.ToUpper(s[:1]) + s[1:] + "Function"
}
