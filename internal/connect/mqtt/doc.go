// Package mqtt holds the MQTT input and output (paho.golang): subscribe and
// publish with QoS 0/1/2 and persistent sessions.
package mqtt
