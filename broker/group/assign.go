package group

// Server-side assignors of KIP-848 consumer groups (Kafka's
// group.consumer.assignors): "uniform", the default, and "range".

// TopicID is a topic's uuid.
type TopicID = [16]byte

// AssignorTopic is a subscribed topic as an assignor sees it.
type AssignorTopic struct {
	Name       string
	Partitions int32
}

// AssignorMember is one member: the existing topics it subscribes to and
// its partitions in the group's current target assignment (what a sticky
// assignor keeps).
type AssignorMember struct {
	ID         string
	InstanceID string
	RackID     string // not used: Keel's assignors are not rack aware
	Subscribed []TopicID
	Current    map[TopicID][]int32
}

// Assignment maps member id → topic id → sorted partitions.
type Assignment map[string]map[TopicID][]int32

// ServerAssignors are the assignors a member may name, the default first.
var ServerAssignors = []string{"uniform", "range"}

// Assign runs the named server assignor, "uniform" or "range" (see
// assignor.go); an unknown name is an error. Every partition of a
// subscribed topic goes to exactly one member subscribed to it; every
// member is in the result, with an empty assignment if it gets nothing.
// It only reads its arguments.
func Assign(assignor string, members []AssignorMember, topics map[TopicID]AssignorTopic) (Assignment, error) {
	return runServerAssignor(assignor, members, topics)
}
