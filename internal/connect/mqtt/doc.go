// Package mqtt: MQTT 5 (and 3.1.1) subscribe and publish with QoS 0/1/2 and persistent sessions (paho.golang).
package mqtt
